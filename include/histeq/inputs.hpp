// histeq/inputs.hpp — the files of a batch and their outputs, planned before any work: which
// image files the inputs name (files as themselves, the image files of folders), where each one
// is written, and the collisions that forbid a run. The command line's batch and Python's
// equalize_files / clahe_files plan with these calls, so both take the same files and write the
// same names; what a front end does with a folder it could not list is its own choice.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "histeq/executor.hpp"

namespace histeq {

/// True for the extensions (lower case, with the dot) a folder's files are taken by: .png .jpg
/// .jpeg .bmp .tga .gif .pnm .pgm .ppm.
bool readable_extension(const std::string& ext);
/// True for the extensions (lower case, with the dot) histeq writes: .png .jpg .jpeg .bmp .tga
/// .pgm .ppm .pnm (a GIF input needs another output format).
bool writable_extension(const std::string& ext);

/// One image file of the inputs.
struct InputFile {
  std::string input;  ///< the path to read: a file input as given, a folder's file under it
  /// The path of its output under the output folder: a file input's name, a folder's file's
  /// path relative to the folder (subfolders kept).
  std::string relative;
};

/// An input, or an entry of a folder input, that could not be listed: a run goes on with the
/// other files and counts it as failed (as find and cp -r do).
struct UnlistedInput {
  enum class Kind : std::uint8_t {
    folder,   ///< a folder that could not be listed (no permission, a path too long, I/O)
    entry,    ///< an entry whose type could not be read (a symbolic link loop named .png)
    missing,  ///< an input that does not exist and is not named as an image file
  };
  std::string path;
  std::string reason;  ///< the system's words for `code`
  int code = 0;        ///< the errno of the failure (ENOENT, EACCES, ENAMETOOLONG, ELOOP, ...)
  Kind kind = Kind::folder;
  /// "cannot list folder 'PATH': REASON", "cannot read 'PATH': REASON",
  /// "no such folder (or file): 'PATH'".
  std::string message() const;
};

/// The files of a list of inputs, in order, and what could not be listed.
struct InputList {
  std::vector<InputFile> files;
  std::vector<UnlistedInput> unlisted;
};

/// The image files the inputs name: a file as itself (whatever its extension: it is read and
/// its decoder says what it is); a folder's files by their extension (readable_extension),
/// sorted by path (bytewise), with `recursive` its subfolders' too, not following symbolic
/// links to folders. The walk does not enter `output_dir` (empty: none) when it lies inside a
/// folder input, compared by canonical path, so that a second run into a folder inside its
/// input does not take the first run's outputs as inputs. A path that does not exist and has
/// no image extension (a mistyped folder) is unlisted (Kind::missing), as is every folder that
/// cannot be listed; the walk goes on with the others. Paths longer than PATH_MAX are listed as
/// far as the system allows and the rest unlisted with its reason. Never throws for a path.
InputList list_inputs(const std::vector<std::string>& inputs, bool recursive,
                      const std::string& output_dir = std::string());

/// How the outputs are named.
struct OutputNaming {
  /// The output format of every file as an extension (".png", ".jpg", ".bmp", ".tga", ".pgm",
  /// ".ppm", ".pnm"), which replaces each file's own; empty: each file keeps its extension.
  std::string format;
  /// Put before the extension: "a.png" with "-eq" → "a-eq.png". No path separator.
  std::string suffix;
};

/// Words of the UsageError for a file whose own format histeq cannot write when no format is
/// given: followed by "png (or jpg, bmp, tga, pnm)". A front end names its own way of giving
/// the format in their place.
inline constexpr char kGiveAnOutputFormat[] = "give an output format: ";

/// One item per file, in order: input, output (output_dir / relative, normalized lexically,
/// with `naming` applied) and naming.format. Throws UsageError, before any work, for a format
/// histeq does not write, a suffix holding a path separator, a file whose own format histeq
/// cannot write when no format is given, two files that would write one output (also through a
/// symbolic link), and an output that is another file's input (its path resolved: a symbolic
/// link's target). An output that is its own input is allowed: it replaces the file once read
/// (a hard link to another input too: the rename replaces its name only).
std::vector<WorkItem> plan_outputs(const std::vector<InputFile>& files,
                                   const std::string& output_dir, const OutputNaming& naming);

/// A batch's plan: what list_inputs and plan_outputs give together.
struct FilePlan {
  std::vector<WorkItem> items;
  std::vector<UnlistedInput> unlisted;
};

/// What plan_files needs.
struct FilePlanOptions {
  std::string output_dir;  ///< where the outputs go; also the folder the walk does not enter
  OutputNaming naming;
  bool recursive = false;  ///< folder inputs: their subfolders too
};

/// list_inputs, then plan_outputs of the files found (throws as plan_outputs does). An empty
/// plan is no error here: whether nothing to do is one is the caller's to say.
FilePlan plan_files(const std::vector<std::string>& inputs, const FilePlanOptions& options);

/// The output folder (FileError naming it when it cannot be made: the batch's error), then the
/// folders the items' outputs go in (-r); one of these failing fails only the outputs in it,
/// when they are written, each with its reason. For Executor::run's before_files, so that a run
/// that cannot start (no usable device) makes no folder.
void make_output_folders(const std::vector<WorkItem>& items, const std::string& output_dir);

}  // namespace histeq
