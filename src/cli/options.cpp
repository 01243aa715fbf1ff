// cli/options.cpp — the option parsing and validation the commands share (cli/options.hpp):
// every parse or range error names the option and what it takes.
#include "cli/options.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <ostream>
#include <sstream>
#include <utility>

#include "cli/batch.hpp"
#include "cli/mistakes.hpp"
#include "histeq/error.hpp"
#include "histeq/image16.hpp"
#include "histeq/image_io.hpp"
#include "histeq/inputs.hpp"
#include "histeq/jpeg_codec.hpp"

namespace histeq::cli {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string num(double v, int prec) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}

void print_stage_table(std::ostream& o, const std::vector<std::pair<const char*, double>>& rows) {
  o << "stage            ms\n";
  for (const auto& [name, ms] : rows)
    o << std::left << std::setw(10) << name << std::right << std::setw(9) << num(ms) << '\n';
}

namespace {

// cxxopts quotes names with ‘…’; our messages use plain ASCII quotes.
std::string ascii_quotes(std::string s) {
  for (const char* q : {"\xE2\x80\x98", "\xE2\x80\x99"}) {
    for (std::size_t p; (p = s.find(q)) != std::string::npos;) s.replace(p, 3, "'");
  }
  return s;
}

/// What each numeric option takes, for the parse error of a value cxxopts cannot read
/// ("Argument '-1' failed to parse" names neither the option nor the range) and of one it reads
/// only in part (check_numeric_values).
const std::map<std::string, std::string>& value_ranges() {
  static const std::map<std::string, std::string> m = {
      {"--max-pixels", "a whole number of pixels in 1..18446744073709551615"},
      {"--jobs", "a whole number in 0.." + std::to_string(kMaxJobs) + " (0: the number of cores)"},
      {"--max-inflight-mb", "a whole number of megabytes in 1.." +
                                std::to_string(std::numeric_limits<std::size_t>::max() >> 20)},
      {"--png-level", "a whole number in 0..9"},
      {"--quality", "a whole number in 1..100"},
      {"--depth", "8 or 16"},
      {"--clip", "a finite number (0 or less: no clipping)"},
      {"--clip-limit", "a finite number (0 or less: no clipping)"},
      {"--bins", "a whole number in 1..4096"},
  };
  return m;
}

/// The option (as "--long") whose value `value` is in args: "--opt value", "-o value",
/// "--opt=value", "-ovalue"; empty when none is found.
std::string option_of_value(const std::vector<std::string>& args, const std::string& value,
                            const cxxopts::Options& options) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string opt;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      if (a.substr(a.find('=') + 1) != value) continue;
      opt = a.substr(0, a.find('='));
    } else if (i + 1 < args.size() && args[i + 1] == value && a.size() > 1 && a[0] == '-') {
      opt = a;
    } else if (!value.empty() && a.size() == value.size() + 2 && a[0] == '-' && a[1] != '-' &&
               a.compare(2, std::string::npos, value) == 0) {
      opt = a.substr(0, 2);  // the value joined to its short option: "-q90x"
    } else {
      continue;
    }
    if (opt.rfind("--", 0) == 0) return opt;
    // a short option: its long name from the help groups
    for (const auto& g : options.groups()) {
      for (const auto& o : options.group_help(g).options) {
        if ("-" + o.s == opt) return "--" + o.l.front();
      }
    }
    return opt;
  }
  return "";
}

/// The whole text is a decimal whole number (digits only). cxxopts also takes hexadecimal
/// ("0x10") and a sign for integer options.
bool whole_number_text(const std::string& v) {
  return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
}

/// The whole text is a decimal number: [+-] digits [. digits] [e [+-] digits] (or .digits).
/// cxxopts reads a floating option with a stream, which stops at the first byte it cannot use
/// and keeps what came before: "2abc" and "2,5" were 2, "0x10" was 0.
bool decimal_number_text(const std::string& v) {
  std::size_t i = 0;
  auto digits = [&] {
    const std::size_t from = i;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') ++i;
    return i - from;
  };
  if (i < v.size() && (v[i] == '+' || v[i] == '-')) ++i;
  std::size_t mantissa = digits();
  if (i < v.size() && v[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
    ++i;
    if (i < v.size() && (v[i] == '+' || v[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == v.size();
}

/// Every numeric option given (value_ranges) must be all of its text: a value with junk after
/// the number, a hexadecimal one, a suffix, is a usage error naming the option and its range.
void check_numeric_values(const cxxopts::ParseResult& r, const std::string& command) {
  for (const cxxopts::KeyValue& kv : r.arguments()) {
    const std::string opt = "--" + kv.key();
    const auto it = value_ranges().find(opt);
    if (it == value_ranges().end()) continue;
    const std::string& v = kv.value();
    const bool ok =
        opt == "--clip" || opt == "--clip-limit" ? decimal_number_text(v) : whole_number_text(v);
    if (!ok)
      throw UsageError(opt + " takes " + it->second + ", got '" + v + "' (see 'histeq " + command +
                       " --help')");
  }
}

}  // namespace

Command::Command(const std::string& cmd, const std::string& description)
    : name(cmd), options("histeq " + cmd, description) {
  options.set_width(110);
}

void Command::add_name(const std::string& spec) {
  const auto comma = spec.find(',');
  names.push_back("--" + (comma == std::string::npos ? spec : spec.substr(comma + 1)));
}

void Command::add_flag(const std::string& spec, const std::string& help) {
  options.add_options()(spec, help);
  add_name(spec);
}

std::string Command::valid() const {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::string Command::missing_value(const std::string& cxxopts_message) const {
  // "Option 'o' is missing an argument": name it both ways (-o/--output) and what it takes.
  const auto a = cxxopts_message.find('\''), b = cxxopts_message.rfind('\'');
  const std::string opt =
      (a != std::string::npos && b > a) ? cxxopts_message.substr(a + 1, b - a - 1) : "";
  for (const auto& g : options.groups()) {
    for (const auto& o : options.group_help(g).options) {
      if (opt.empty() || o.l.empty() || (o.s != opt && o.l.front() != opt)) continue;
      const std::string names = (o.s.empty() ? "" : "-" + o.s + "/") + "--" + o.l.front();
      return names + " needs a value" + (o.arg_help.empty() ? "" : " (" + o.arg_help + ")") +
             " in 'histeq " + name + "' (see 'histeq " + name + " --help')";
    }
  }
  return cxxopts_message + " in 'histeq " + name + "' (see 'histeq " + name + " --help')";
}

std::string Command::value_help(const std::string& option) const {
  const auto& m = value_ranges();
  const auto it = m.find(option);
  return it == m.end() ? std::string() : it->second;
}

cxxopts::ParseResult Command::parse(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  const std::string prog = "histeq " + name;
  argv.push_back(prog.c_str());
  for (const auto& a : args) argv.push_back(a.c_str());
  refuse_misread_options(args, options, name);
  try {
    cxxopts::ParseResult r = options.parse(static_cast<int>(argv.size()), argv.data());
    if (!r.unmatched().empty()) {
      throw UsageError("unexpected argument '" + r.unmatched().front() + "' for 'histeq " + name +
                       "' (see 'histeq " + name + " --help')");
    }
    check_numeric_values(r, name);
    return r;
  } catch (const cxxopts::exceptions::no_such_option& e) {
    // cxxopts says "Option 'x' does not exist"; name it as the user typed it.
    const std::string msg = ascii_quotes(e.what());
    const auto a = msg.find('\''), b = msg.rfind('\'');
    std::string opt = (a != std::string::npos && b > a) ? msg.substr(a + 1, b - a - 1) : msg;
    if (!opt.empty() && opt[0] != '-') opt = (opt.size() == 1 ? "-" : "--") + opt;
    throw UsageError("unknown option '" + opt + "' for 'histeq " + name + "'" +
                     did_you_mean(opt, names) + "; valid options: " + valid());
  } catch (const cxxopts::exceptions::missing_argument& e) {
    throw UsageError(missing_value(ascii_quotes(e.what())));
  } catch (const cxxopts::exceptions::option_requires_argument& e) {
    throw UsageError(missing_value(ascii_quotes(e.what())));
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    // "Argument 'X' failed to parse": name the option that had X, and what it takes.
    const std::string msg = ascii_quotes(e.what());
    const auto a = msg.find('\''), b = msg.rfind('\'');
    const std::string value = (a != std::string::npos && b > a) ? msg.substr(a + 1, b - a - 1) : "";
    const std::string opt = option_of_value(args, value, options);
    if (opt.empty())
      throw UsageError(msg + " in 'histeq " + name + "' (see 'histeq " + name + " --help')");
    const std::string takes = value_help(opt);
    throw UsageError(opt + " takes " + (takes.empty() ? std::string("a number") : takes) +
                     ", got '" + value + "' (see 'histeq " + name + " --help')");
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(ascii_quotes(e.what()) + " in 'histeq " + name + "' (see 'histeq " + name +
                     " --help')");
  }
}

// ---- shared option groups ----

namespace {

/// --mode's help: what each mode does to a colour image in this command.
std::string mode_help(OpKind kind) {
  switch (kind) {
    case OpKind::clahe:
      return "colour images: luma (CLAHE of Y of YCbCr, default), rgb (each channel), gray (one "
             "channel: the luma's CLAHE)";
    case OpKind::match:
      return "colour images: luma (Y of YCbCr matched to the reference's, default), rgb (each "
             "channel to the reference's channel), gray (one channel of matched luma)";
    case OpKind::histogram:
      return "colour images: luma (Y of YCbCr, default) or gray (the same one plane), rgb (R, G "
             "and B)";
    case OpKind::equalize: break;
  }
  return "colour images: luma (Y of YCbCr, default), rgb (each channel), gray (one channel of "
         "equalized luma)";
}

}  // namespace

void add_kernel_backend(Command& c, OpKind kind, const std::string& kernel_help) {
  c.add("k,kernel",
        kernel_help.empty()
            ? std::string("histogram kernel: auto (the fastest exact one) or a name from 'histeq "
                          "kernels'")
            : kernel_help,
        cxxopts::value<std::string>()->default_value("auto"), "NAME");
  c.add("b,backend", "where to run: auto (GPU if usable, else CPU), cuda, cpu",
        cxxopts::value<std::string>()->default_value("auto"), "NAME");
  c.add("m,mode", mode_help(kind), cxxopts::value<std::string>(), "NAME");
  c.add("max-pixels",
        "refuse images with more than N pixels (width x height), checked from the header",
        cxxopts::value<std::uint64_t>()->default_value(std::to_string(kDefaultMaxPixels)), "N");
}

void add_depth(Command& c, bool writes) {
  c.add("depth",
        writes ? "bits per sample to work at and write: 8 (16-bit inputs converted, round(v/257)) "
                 "or 16 (8-bit inputs widened, v*257, written as 16-bit PNG/PGM/PPM); default: "
                 "the input's own (16-bit PNG/PGM/PPM stay 16-bit)"
               : "bits per sample to count at: 8 (16-bit inputs converted, round(v/257): 256 "
                 "bins) or 16 (8-bit inputs widened, v*257: 65536 bins); default: the input's own "
                 "(16-bit PNG/PGM/PPM: 65536 bins)",
        cxxopts::value<int>(), "BITS");
}

int read_depth(const cxxopts::ParseResult& r) {
  if (!r.count("depth")) return 0;
  const int d = r["depth"].as<int>();
  if (d != 8 && d != 16) throw UsageError("--depth must be 8 or 16, got " + std::to_string(d));
  return d;
}

const char* alias_or_option(const cxxopts::ParseResult& r, const char* alias, const char* option) {
  if (r.count(alias) == 0) return option;
  if (r.count(option) > 0) {
    throw UsageError(std::string("--") + alias + " is the earlier name of --" + option +
                     "; give one of them");
  }
  return alias;
}

void parse_tiles(const std::string& s, ClaheOptions& o, const std::string& option) {
  const std::string range = "1.." + std::to_string(kMaxClaheTiles);
  const std::string takes = "--" + option + " takes WxH (columns x rows, each " + range +
                            ") or N for NxN, e.g. 8x8; got '" + s + "'";
  const auto x = s.find_first_of("xX");
  auto side = [&](const std::string& t, int& v) {
    if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError(takes);
    const long n = std::stol(t);
    if (n < 1 || n > kMaxClaheTiles)
      throw UsageError("--" + option + ": each side must be in " + range + ", got '" + s + "'");
    v = int(n);
  };
  if (x == std::string::npos) {  // one number: a square grid
    side(s, o.tiles_x);
    o.tiles_y = o.tiles_x;
    return;
  }
  side(s.substr(0, x), o.tiles_x);
  side(s.substr(x + 1), o.tiles_y);
}

Common read_common(const cxxopts::ParseResult& r) {
  Common c;
  c.opt.kernel = r["kernel"].as<std::string>();
  if (c.opt.kernel != "auto") c.entry = &kernels::find_kernel(c.opt.kernel);
  c.opt.backend = parse_backend(r["backend"].as<std::string>());
  if (r.count("mode")) c.opt.mode = parse_mode(r["mode"].as<std::string>());
  c.max_pixels = r["max-pixels"].as<std::uint64_t>();
  if (c.max_pixels == 0) {
    throw UsageError("--max-pixels must be at least 1 (it takes " +
                     value_ranges().at("--max-pixels") + "), got 0");
  }
  return c;
}

void refuse_kernel_on_cpu(const Common& c) {
  if (c.entry && c.opt.backend == Backend::cpu) {
    throw UsageError("--kernel " + std::string(c.entry->name) +
                     " is a GPU kernel; --backend cpu counts with the CPU's own loop (valid with "
                     "--backend cpu: --kernel auto)");
  }
}

void settle_backend(Common& c, std::ostream& err) {
  std::string why;
  const Backend requested = c.opt.backend;
  c.opt.backend = resolve_backend(requested, &why);
  if (requested == Backend::automatic && c.opt.backend == Backend::cpu) {
    err << "histeq: no usable CUDA device (" << (why.empty() ? "unknown reason" : why)
        << "); running on the CPU\n";
  }
}

void warn_inexact(const Common& c, std::ostream& err) {
  if (c.entry && !c.entry->exact) {
    err << "histeq: warning: kernel '" << c.entry->name
        << "' is not exact (unsynchronized updates lose counts); never use it for real output\n";
  }
}

void report_lost(const Common& c, const EqualizeReport& rep, std::uint64_t total,
                 std::ostream& err) {
  if (!c.entry || c.entry->exact) return;
  if (rep.backend != "cuda") {
    err << "histeq: kernel '" << c.entry->name
        << "' runs only on the GPU; the CPU counted exactly\n";
    return;
  }
  err << "histeq: kernel '" << c.entry->name << "' lost " << rep.racy_lost << " of " << total
      << " counts";
  if (total > 0) {
    err << " (" << std::fixed << std::setprecision(2)
        << 100.0 * double(rep.racy_lost) / double(total) << "%)";
  }
  err << '\n';
}

// ---- the counted region (--mask, --roi) and matching's reference (--reference) ----

void add_region_options(Command& c, bool writes, bool tiles) {
  c.add("mask",
        std::string("count only the pixels where this gray image (the input's size, 8 or 16 bits) "
                    "is nonzero") +
            (tiles    ? ": each tile's histogram, clip limit and LUT come from its counted pixels "
                        "(a tile with none keeps the identity LUT); every pixel is interpolated"
             : writes ? ": the histogram and its LUT come from them, the LUT maps every pixel"
                      : ""),
        cxxopts::value<std::string>(), "FILE");
  c.add("roi",
        "count only the pixels of this rectangle: left X, top Y, width W, height H in pixels "
        "(OpenCV's Rect); with --mask, the mask's pixels inside it",
        cxxopts::value<std::string>(), "X,Y,W,H");
}

Roi parse_roi(const std::string& s) {
  const auto bad = [&](const std::string& why) {
    return UsageError("--roi takes X,Y,W,H (left, top, width and height in pixels, whole numbers" +
                      why + "), e.g. 0,0,640,480; got '" + s + "'");
  };
  std::vector<long long> v;
  for (std::size_t start = 0;;) {
    const std::size_t comma = s.find(',', start);
    const std::string t =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (t.empty() || t.size() > 10 || !whole_number_text(t)) throw bad("");
    v.push_back(std::stoll(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (v.size() != 4) throw bad("");
  if (v[2] < 1 || v[3] < 1) throw bad("; W and H at least 1");
  if (v[0] + v[2] > INT_MAX || v[1] + v[3] > INT_MAX)
    throw bad("; X + W and Y + H at most 2^31 - 1");
  return Roi{int(v[0]), int(v[1]), int(v[2]), int(v[3])};
}

namespace {

/// An image file the command line reads besides its inputs (--mask, --reference), whole, at its
/// own depth; a file that cannot be read or decoded is a usage error naming the option.
template <class F>
auto decode_option_file(const char* option, const std::string& path, F&& decode) {
  if (path == "-")
    throw UsageError(std::string("--") + option +
                     " takes an image file, not '-' (standard input holds the image)");
  try {
    const std::vector<std::uint8_t> bytes = read_image_file(path);
    return decode(bytes);
  } catch (const std::bad_alloc&) {
    throw Error(std::string("--") + option + " '" + path + "': out of memory");
  } catch (const Error& e) {  // UsageError too: the limit of --max-pixels, say
    throw UsageError(std::string("--") + option + ": " + e.what());
  }
}

/// A mask decoded as three channels equal in every pixel (a gray BMP, which is written with a
/// palette, a gray palette PNG) made the one channel it is; another image is left as it is.
template <class Img>
void gray_if_channels_equal(Img& m) {
  if (m.channels != 3) return;
  const std::size_t n = m.pixel_count();
  for (std::size_t i = 0; i < n; ++i) {
    const auto* p = &m.pixels[3 * i];
    if (p[0] != p[1] || p[0] != p[2]) return;
  }
  for (std::size_t i = 0; i < n; ++i) m.pixels[i] = m.pixels[3 * i];
  m.pixels.resize(n);
  m.channels = 1;
}

}  // namespace

void read_region(const cxxopts::ParseResult& r, Common& cm) {
  if (r.count("roi")) cm.opt.region.roi = parse_roi(r["roi"].as<std::string>());
  if (!r.count("mask")) return;
  const std::string path = r["mask"].as<std::string>();
  Image mask = decode_option_file("mask", path, [&](const std::vector<std::uint8_t>& bytes) {
    if (!is_16bit_data(bytes.data(), bytes.size())) {
      Image m = decode_image(bytes.data(), bytes.size(), path, cm.max_pixels);
      gray_if_channels_equal(m);
      return m;
    }
    Image16 m16 = decode_image16(bytes.data(), bytes.size(), path, cm.max_pixels);
    gray_if_channels_equal(m16);
    Image m;  // 16 bits: nonzero counted (not narrowed: 1..128 would round to 0)
    m.width = m16.width;
    m.height = m16.height;
    m.channels = m16.channels;
    m.pixels.resize(m16.pixels.size());
    for (std::size_t i = 0; i < m.pixels.size(); ++i) m.pixels[i] = m16.pixels[i] ? 255 : 0;
    return m;
  });
  if (mask.channels != 1)
    throw UsageError("--mask '" + path + "' has " + std::to_string(mask.channels) +
                     " channels: a mask is a gray image (one channel, or three equal in every "
                     "pixel; no alpha; nonzero: counted)");
  if (std::none_of(mask.pixels.begin(), mask.pixels.end(), [](std::uint8_t v) { return v != 0; }))
    throw UsageError("--mask '" + path +
                     "' counts no pixel (every sample is 0): there is no histogram to take");
  // The rectangle and the mask are every image's: when the rectangle lies inside the mask and
  // the mask counts no pixel there, no image can run (one outside it fails per image, on size).
  if (const auto& roi = cm.opt.region.roi;
      roi && roi->x + roi->width <= mask.width && roi->y + roi->height <= mask.height) {
    bool counted = false;
    for (int y = roi->y; y < roi->y + roi->height && !counted; ++y) {
      const std::uint8_t* row = &mask.pixels[std::size_t(y) * std::size_t(mask.width)];
      counted = std::any_of(row + roi->x, row + roi->x + roi->width,
                            [](std::uint8_t v) { return v != 0; });
    }
    if (!counted)
      throw UsageError("--mask '" + path + "' counts no pixel inside the rectangle --roi " +
                       std::to_string(roi->x) + "," + std::to_string(roi->y) + "," +
                       std::to_string(roi->width) + "," + std::to_string(roi->height) +
                       ": there is no histogram to take");
  }
  mask.icc.clear();
  mask.exif.clear();
  cm.mask_name = path;
  cm.opt.region.mask = std::make_shared<const Image>(std::move(mask));
}

std::string region_summary(const Common& cm) {
  std::string s;
  if (cm.opt.region.mask) s = "mask " + cm.mask_name;
  if (const auto& roi = cm.opt.region.roi)
    s += (s.empty() ? "roi " : ", roi ") + std::to_string(roi->x) + "," + std::to_string(roi->y) +
         "," + std::to_string(roi->width) + "," + std::to_string(roi->height);
  return s;
}

std::shared_ptr<const MatchReference> read_reference(const std::string& path,
                                                     std::uint64_t max_pixels) {
  return decode_option_file(
      "reference", path,
      [&](const std::vector<std::uint8_t>& bytes) -> std::shared_ptr<const MatchReference> {
        if (is_16bit_data(bytes.data(), bytes.size()))
          return std::make_shared<const MatchReference>(
              decode_image16(bytes.data(), bytes.size(), path, max_pixels), path);
        return std::make_shared<const MatchReference>(
            decode_image(bytes.data(), bytes.size(), path, max_pixels), path);
      });
}

// ---- batch options and file names ----

void add_batch_options(Command& c, bool equalize) {
  c.add_flag("r,recursive",
             "folder inputs: descend into subfolders (outputs keep the relative path)");
  c.add("jobs", "CPU worker threads for a batch (0: the number of cores)",
        cxxopts::value<int>()->default_value("0"), "N");
  c.add("max-inflight-mb",
        "cap on the megabytes of images in flight in a batch (default: max(256, 128 x jobs), at "
        "most a quarter of the memory)",
        cxxopts::value<std::size_t>(), "MB");
  c.add("devices",
        "CUDA device ordinals for a batch (e.g. 0,1; a repeated ordinal gives that GPU more "
        "slots); default: every visible device. The JPEG device route runs " +
            std::to_string(kJpegSlotsPerDevice) + " batches at a time per GPU",
        cxxopts::value<std::string>(), "LIST");
  c.add_flag("quiet", "no notes, no progress bar, no summary line on stderr (errors still)");
  if (equalize) {
    c.add("format",
          "output format of every file: png, jpg, bmp, tga, pgm (gray), ppm (colour), pnm (PGM for "
          "gray, PPM for colour) (default: each input's own; required with -o -)",
          cxxopts::value<std::string>(), "FMT");
    c.add("png-level",
          "PNG deflate level 0..9 (1: ISA-L igzip on several threads; 0: stored; 2..9: libdeflate, "
          "9 smallest)",
          cxxopts::value<int>()->default_value(std::to_string(kDefaultPngLevel)), "L");
  }
}

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string lower_ext(const fs::path& p) { return lower(p.extension().string()); }

// The library's lists (histeq/inputs.hpp): the batch's folders are listed by the same.
bool readable_ext(const std::string& e) { return readable_extension(e); }
bool writable_ext(const std::string& e) { return writable_extension(e); }

std::string parse_format(const std::string& f) {
  std::string e = lower(f);
  if (!e.empty() && e[0] == '.') e.erase(0, 1);
  if (e == "png" || e == "jpg" || e == "bmp" || e == "tga") return "." + e;
  if (e == "jpeg") return ".jpg";
  if (e == "pgm" || e == "ppm" || e == "pnm") return "." + e;  // 8 or 16 bits (io/pnm_write.hpp)
  throw UsageError("unknown --format '" + f + "' (valid: " + kOutputFormats + ")");
}

std::vector<int> parse_devices(const std::string& s) {
  auto bad = [&] {
    return UsageError("--devices takes CUDA device ordinals separated by commas, e.g. 0,1; got '" +
                      s + "'");
  };
  if (!s.empty() && s.back() == ',') throw bad();  // getline would end the list without an item
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) {
    // decimal digits only: strtol alone also took " 1" and "+1"
    if (t.empty() || t.size() > 4 || !whole_number_text(t)) throw bad();
    const long d = std::strtol(t.c_str(), nullptr, 10);
    if (d > 1024) throw bad();
    v.push_back(int(d));
  }
  if (v.empty()) throw UsageError("--devices: empty list");
  return v;
}

bool jpeg_ext(const std::string& e) { return e == ".jpg" || e == ".jpeg"; }

bool pnm_ext(std::string e) {
  e = lower(std::move(e));
  return e == ".pgm" || e == ".ppm" || e == ".pnm";
}

int read_png_level(const cxxopts::ParseResult& r) {
  const int level = r["png-level"].as<int>();
  if (level < 0 || level > 9) {
    throw UsageError("--png-level takes " + value_ranges().at("--png-level") + ", got " +
                     std::to_string(level));
  }
  return level;
}

int read_quality(const cxxopts::ParseResult& r) {
  const int quality = r["quality"].as<int>();
  if (quality < 1 || quality > 100) {
    throw UsageError("--quality takes " + value_ranges().at("--quality") + ", got " +
                     std::to_string(quality));
  }
  return quality;
}

void refuse_jpeg_options(const cxxopts::ParseResult& r, const std::string& ext) {
  if (jpeg_ext(fs_extension_lower(ext))) return;
  for (const char* o : {"quality", "subsampling"}) {
    if (r.count(o)) {
      throw UsageError(std::string("--") + o +
                       " applies to JPEG outputs only, and this output is " +
                       (ext.empty() ? std::string("not JPEG") : "'" + ext + "'") +
                       " (write .jpg, or use --format jpg, or leave --" + o + " out)");
    }
  }
}

void refuse_png_options(const cxxopts::ParseResult& r, const std::string& ext) {
  if (fs_extension_lower(ext) == ".png" || !r.count("png-level")) return;
  throw UsageError("--png-level applies to PNG outputs only, and this output is " +
                   (ext.empty() ? std::string("not PNG") : "'" + ext + "'") +
                   " (write .png, or use --format png, or leave --png-level out)");
}

void refuse_batch_only_options(const cxxopts::ParseResult& r) {
  for (const char* opt : {"jobs", "max-inflight-mb", "devices"}) {
    if (r.count(opt) == 0) continue;
    throw UsageError(std::string("--") + opt +
                     " applies to a batch (several inputs or a folder), and this run has one "
                     "input file (leave --" +
                     opt + " out)");
  }
}

std::ostream& discarded_stream() {
  static std::ostream discard(nullptr);  // no buffer: badbit set, every write is dropped
  return discard;
}

/// Standard input, whole, up to the bytes a decoder takes (INT_MAX, as a file: image_io.hpp).
/// An endless or oversized stream (`< /dev/zero`) stops at that bound with an error naming
/// standard input, rather than reading until memory runs out; a regular file is refused from
/// its size before anything is read.
std::vector<std::uint8_t> read_stdin() {
  constexpr std::size_t kMax = std::size_t(INT_MAX);
  const std::string too_large = "cannot read standard input: it holds more than " +
                                std::to_string(kMax) +
                                " bytes, the most the decoder takes (as from a file)";
  // Read into a buffer that grows by doubling (realloc: large blocks move by remapping, neither
  // copied nor zero-filled) up to kMax + 1 bytes, one byte past the bound saying there is more.
  struct Free {
    void operator()(void* q) const { std::free(q); }
  };
  std::unique_ptr<std::uint8_t, Free> buf;
  std::size_t cap = 0, used = 0;
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode) && std::uint64_t(st.st_size) > kMax)
    throw Error(too_large);
  for (;;) {
    if (used == cap) {
      if (used > kMax) throw Error(too_large);
      const std::size_t grown = std::min(kMax + 1, std::max(std::size_t(1) << 16, 2 * cap));
      void* q = std::realloc(buf.get(), grown);
      if (!q) throw std::bad_alloc();
      (void)buf.release();
      buf.reset(static_cast<std::uint8_t*>(q));
      cap = grown;
    }
    const ssize_t n = ::read(STDIN_FILENO, buf.get() + used, cap - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("cannot read standard input: ") + std::strerror(errno));
    }
    if (n == 0) break;
    used += std::size_t(n);
  }
  std::vector<std::uint8_t> v(buf.get(), buf.get() + used);
  if (v.empty()) throw Error("cannot read standard input: it is empty");
  return v;
}

bool stderr_is_tty(std::ostream& err) { return &err == &std::cerr && ::isatty(STDERR_FILENO); }

// ---- the per-file operation (clahe, 16-bit) ----

std::string fs_extension_lower(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  return lower(path.substr(dot));
}

ItemOpOptions item_op_options(const cxxopts::ParseResult& r, const Common& cm, OpKind kind) {
  ItemOpOptions io;
  io.op.kind = kind;
  io.op.equalize = cm.opt;
  io.max_pixels = cm.max_pixels;
  io.op.depth = read_depth(r);
  if (kind == OpKind::histogram) return io;
  io.encode.quality = r["quality"].as<int>();
  io.encode.png_level = r["png-level"].as<int>();
  io.encode.subsampling = jpeg::parse_subsampling(r["subsampling"].as<std::string>());
  if (kind == OpKind::match)  // decoded once, here: every item is matched to it
    io.op.reference = read_reference(r["reference"].as<std::string>(), cm.max_pixels);
  if (kind == OpKind::clahe) {
    // --clip and --tiles: the earlier names of --clip-limit and --tile-grid-size.
    const char* clip = alias_or_option(r, "clip", "clip-limit");
    io.op.clahe.clip_limit = r[clip].as<double>();
    if (!std::isfinite(io.op.clahe.clip_limit)) {  // (the value text's check says it first)
      std::ostringstream v;
      v << io.op.clahe.clip_limit;
      throw UsageError("--" + std::string(clip) +
                       " must be a finite number (OpenCV's clipLimit; 0 or less: no clipping), "
                       "got " +
                       v.str());
    }
    const char* tiles = alias_or_option(r, "tiles", "tile-grid-size");
    parse_tiles(r[tiles].as<std::string>(), io.op.clahe, tiles);
    validate(io.op.clahe);
  }
  return io;
}

std::string clahe_summary(const ClaheOptions& o) {
  std::ostringstream s;
  s << "clip " << o.clip_limit << ", tiles " << o.tiles_x << "x" << o.tiles_y;
  return s.str();
}

std::string with_hints(const std::string& message) {
  std::string m = with_option_hints(message);
  const auto has = [&m](const char* phrase) { return m.find(phrase) != std::string::npos; };
  if (has(kNoDeviceForCuda) && !has("--backend")) {
    m += " (asked for by --backend cuda; --backend auto runs on the CPU instead)";
  } else if (has(kNoDeviceForGpuJpeg) && !has("--decoder")) {
    m += " (asked for by --decoder gpu; --decoder auto decodes on the CPU instead)";
  } else if (has(kGpuOutOfMemory) && !has("--backend")) {
    m += "; try --backend cpu";
  }
  if (m.find("no CUDA device ") != std::string::npos && !has("--devices")) {
    m += " (--devices names ordinals from 0)";
  }
  if (has("unknown image type")) m += " (histeq reads JPEG, PNG, BMP, TGA, GIF, binary PGM/PPM)";
  if (has("it is a FIFO (named pipe)")) m += "; a pipe's image is read as standard input, '-'";
  return m;
}

}  // namespace histeq::cli
