// inputs.cpp — the files of a batch and their outputs (histeq/inputs.hpp): the listing of the
// inputs and the naming of the outputs that the command line and the Python package share.
#include "histeq/inputs.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "histeq/error.hpp"

namespace histeq {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string lower_ext(const fs::path& p) { return lower(p.extension().string()); }

/// The extension of an input as named, trailing separators aside ("photos.png/" names a PNG).
std::string named_ext(std::string in) {
  while (in.size() > 1 && in.back() == '/') in.pop_back();
  return lower_ext(fs::path(in));
}

/// The image files of one folder input (recursive: its subfolders too, not following symlinks
/// to folders), appended to `found` with their paths under the folder. A folder that cannot be
/// listed (no permission, a path over PATH_MAX, an I/O error) is appended to `unlisted` and the
/// walk goes on with the others; `skip` says which subfolders not to enter.
template <class Skip>
void list_folder(const std::string& in, bool recursive, const Skip& skip,
                 std::vector<InputFile>& found, std::vector<UnlistedInput>& unlisted) {
  std::vector<fs::path> folders{fs::path(in)};
  while (!folders.empty()) {
    const fs::path dir = std::move(folders.back());
    folders.pop_back();
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::directory_entry& e = *it;
      std::error_code ec2;
      // The entry's type comes from the listing (d_type) where the filesystem gives it: no stat
      // per file, and a path over PATH_MAX still says what it is.
      const bool link = e.is_symlink(ec2);
      const bool sub = !ec2 && e.is_directory(ec2);
      if (recursive && sub && !link) {
        if (!skip(e)) folders.push_back(e.path());
        continue;
      }
      if (!readable_extension(lower_ext(e.path()))) continue;
      const bool file = !ec2 && e.is_regular_file(ec2);
      if (ec2 && ec2 != std::errc::no_such_file_or_directory)  // a dangling link: not an image
        unlisted.push_back(
            {e.path().string(), ec2.message(), ec2.value(), UnlistedInput::Kind::entry});
      if (file) found.push_back({e.path().string(), e.path().lexically_relative(in).string()});
    }
    if (ec)
      unlisted.push_back({dir.string(), ec.message(), ec.value(), UnlistedInput::Kind::folder});
  }
}

/// The path an input names does not exist (not even as a dangling link).
bool missing(const std::string& in) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(in, ec);
  return st.type() == fs::file_type::not_found;
}

}  // namespace

bool readable_extension(const std::string& ext) {
  static const char* const k[] = {".png", ".jpg", ".jpeg", ".bmp", ".tga",
                                  ".gif", ".pnm", ".pgm",  ".ppm"};
  return std::any_of(std::begin(k), std::end(k), [&](const char* x) { return ext == x; });
}

bool writable_extension(const std::string& ext) { return ext != ".gif" && readable_extension(ext); }

std::string UnlistedInput::message() const {
  switch (kind) {
    case Kind::entry: return "cannot read '" + path + "': " + reason;
    case Kind::missing: return "no such folder (or file): '" + path + "'";
    case Kind::folder: break;
  }
  return "cannot list folder '" + path + "': " + reason;
}

InputList list_inputs(const std::vector<std::string>& inputs, bool recursive,
                      const std::string& output_dir) {
  // The walk of a recursive run must not enter the output folder when it lies inside an input
  // folder: a second run of `d` into `d/out` would take the first run's outputs as inputs (and
  // write d/out/out/...). Canonical paths, so that "d/./out" and a link to it are the same.
  std::error_code oec;
  const fs::path out_canon =
      output_dir.empty() ? fs::path() : fs::weakly_canonical(output_dir, oec);
  auto is_output_folder = [&](const fs::directory_entry& e) {
    if (out_canon.empty() || oec) return false;
    std::error_code ec;
    const fs::path c = fs::canonical(e.path(), ec);
    return !ec && c == out_canon;
  };
  InputList list;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<InputFile> found;
      list_folder(in, recursive, is_output_folder, found, list.unlisted);
      std::sort(found.begin(), found.end(),
                [](const InputFile& a, const InputFile& b) { return a.input < b.input; });
      list.files.insert(list.files.end(), found.begin(), found.end());
    } else if (!readable_extension(named_ext(in)) && missing(in)) {
      // Named as no image file and not there: a mistyped folder, not a file to read (whose
      // output name would have no format either).
      list.unlisted.push_back(
          {in, std::generic_category().message(ENOENT), ENOENT, UnlistedInput::Kind::missing});
    } else {
      list.files.push_back({in, fs::path(in).filename().string()});
    }
  }
  return list;
}

namespace {

/// The output of one file: under output_dir, in naming.format or its own, with the suffix.
std::string output_of(const InputFile& f, const std::string& output_dir,
                      const OutputNaming& naming) {
  fs::path rel = f.relative;
  const std::string own = rel.extension().string();
  if (naming.format.empty() && !writable_extension(lower(own))) {
    throw UsageError("cannot write '" + f.input + "' in its own format (" +
                     (own.empty() ? std::string("no extension") : own) +
                     "; histeq writes png, jpg, bmp, tga, pgm, ppm, pnm): " + kGiveAnOutputFormat +
                     "png (or jpg, bmp, tga, pnm)");
  }
  if (!naming.suffix.empty()) rel.replace_filename(rel.stem().string() + naming.suffix + own);
  if (!naming.format.empty()) rel.replace_extension(naming.format);
  return (fs::path(output_dir) / rel).lexically_normal().string();
}

/// The file a path names with every link resolved ("" where it does not exist).
std::string resolved(const std::string& path) {
  char* r = ::realpath(path.c_str(), nullptr);
  if (r == nullptr) return {};
  std::string s(r);
  std::free(r);
  return s;
}

/// Outputs that exist are replaced by the file their path resolves to (a temporary file renamed
/// over it; through a symbolic link, over the link's target). One that is another item's input
/// would be replaced while that file may still be unread; two that resolve to one file would
/// both write it. Both are usage errors. An output that is its own input is replaced once read
/// (in place, as mogrify writes); a hard link to another input is a name of its own, which the
/// rename replaces without touching the other. Paths are resolved only where an output exists.
void refuse_outputs_over_inputs(const std::vector<WorkItem>& items) {
  std::vector<std::string> out(items.size());
  bool any = false;
  for (std::size_t i = 0; i < items.size(); ++i) {
    out[i] = resolved(items[i].output);
    any = any || !out[i].empty();
  }
  if (!any) return;
  std::vector<std::string> in(items.size());
  std::map<std::string, std::size_t> input_at;  // resolved input → its first item
  for (std::size_t i = 0; i < items.size(); ++i) {
    in[i] = resolved(items[i].input);
    if (!in[i].empty()) input_at.emplace(in[i], i);
  }
  std::map<std::string, std::size_t> written;  // resolved output → its item
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (out[i].empty()) continue;
    const auto [at, fresh] = written.emplace(out[i], i);
    if (!fresh)
      throw UsageError("'" + items[at->second].input + "' and '" + items[i].input +
                       "' would both write '" + out[i] +
                       "' (through a link); rename one, or "
                       "use separate runs");
    const auto other = input_at.find(out[i]);
    if (other != input_at.end() && in[i] != out[i])
      throw UsageError("'" + items[i].input + "' would write '" + items[i].output +
                       "', which is the input '" + items[other->second].input +
                       "' too; write the outputs into another folder, or use separate runs");
  }
}

}  // namespace

std::vector<WorkItem> plan_outputs(const std::vector<InputFile>& files,
                                   const std::string& output_dir, const OutputNaming& naming) {
  if (!naming.format.empty() && !writable_extension(naming.format))
    throw UsageError("unknown output format '" + naming.format +
                     "' (histeq writes .png, .jpg, .bmp, .tga, .pgm, .ppm, .pnm)");
  if (naming.suffix.find_first_of(std::string("/\0", 2)) != std::string::npos)
    throw UsageError("the suffix of the output names holds a path separator or a NUL: '" +
                     naming.suffix + "' (it goes before each output's extension)");
  std::vector<WorkItem> items;
  items.reserve(files.size());
  std::map<std::string, std::string> seen;  // output → input
  for (const InputFile& f : files) {
    WorkItem w{f.input, output_of(f, output_dir, naming), naming.format};
    const auto [at, fresh] = seen.emplace(w.output, f.input);
    if (!fresh)
      throw UsageError("'" + at->second + "' and '" + f.input + "' would both write '" + w.output +
                       "'; rename one, or use separate runs");
    items.push_back(std::move(w));
  }
  refuse_outputs_over_inputs(items);
  return items;
}

FilePlan plan_files(const std::vector<std::string>& inputs, const FilePlanOptions& options) {
  InputList list = list_inputs(inputs, options.recursive, options.output_dir);
  return {plan_outputs(list.files, options.output_dir, options.naming), std::move(list.unlisted)};
}

void make_output_folders(const std::vector<WorkItem>& items, const std::string& output_dir) {
  std::error_code ec;
  if (!output_dir.empty() && !fs::is_directory(output_dir, ec)) {
    fs::create_directories(output_dir, ec);
    if (ec) {
      // errno's words mislead here ("File exists" for -o photo.png/ when photo.png is a file, "Not
      // a directory" for -o notes.txt): name the file in the way.
      std::string why = ec.message();
      for (fs::path p = output_dir; !p.empty() && p != p.parent_path(); p = p.parent_path()) {
        std::error_code st_ec;
        const fs::file_status st = fs::status(p, st_ec);
        if (fs::exists(st) && !fs::is_directory(st)) {
          why = "'" + p.string() + "' is a file, not a folder";
          break;
        }
      }
      throw FileError("cannot create folder '" + output_dir + "': " + why, ec.value(), output_dir);
    }
  }
  std::string last;  // the outputs of one folder come together: one stat per folder
  for (const WorkItem& w : items) {
    const fs::path parent = fs::path(w.output).parent_path();
    if (parent.empty() || parent.native() == last) continue;
    last = parent.native();
    if (!fs::is_directory(parent, ec)) fs::create_directories(parent, ec);
  }
}

}  // namespace histeq
