// test_inputs.cpp — the plan of a batch (histeq/inputs.hpp), which the CLI's batch and Python's
// equalize_files share: the files of folders (sorted, by extension, recursion that does not enter
// the output folder), output names (format, suffix), collisions, and the inputs that cannot be
// listed. Only names and folders are made here: the plan reads no image.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "histeq/error.hpp"
#include "histeq/inputs.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

class Inputs : public histeq::test::TempDirTest {
 protected:
  Inputs() : TempDirTest("histeq-inputs") {}
  /// An empty file at `name` (folders made as needed).
  void touch(const std::string& name) const {
    fs::create_directories(fs::path(path(name)).parent_path());
    std::ofstream(path(name)).put('x');
  }
  /// The inputs and relative paths of a listing, as "input -> relative".
  static std::vector<std::string> pairs(const std::vector<histeq::InputFile>& files) {
    std::vector<std::string> v;
    for (const auto& f : files) v.push_back(f.input + " -> " + f.relative);
    return v;
  }
  static std::vector<std::string> outputs(const std::vector<histeq::WorkItem>& items) {
    std::vector<std::string> v;
    for (const auto& w : items) v.push_back(w.output);
    return v;
  }
  /// The what() of the UsageError fn throws ("" when none).
  template <class Fn>
  static std::string usage_error(Fn fn) {
    try {
      fn();
    } catch (const histeq::UsageError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(Inputs, FolderFilesByExtensionSortedAndFilesAsThemselves) {
  touch("in/b.png");
  touch("in/a.JPG");
  touch("in/c.gif");
  touch("in/notes.txt");
  touch("in/sub/d.png");                          // not without recursion
  fs::create_directories(path("in/folder.png"));  // a folder named as an image: not a file
  const std::string in = path("in");
  const histeq::InputList l = histeq::list_inputs({path("z.bmp"), in, "missing.png"}, false);
  EXPECT_EQ(pairs(l.files),
            (std::vector<std::string>{path("z.bmp") + " -> z.bmp", in + "/a.JPG -> a.JPG",
                                      in + "/b.png -> b.png", in + "/c.gif -> c.gif",
                                      // a file named as an image is read (and fails there) even if
                                      // missing: the executor names its error
                                      "missing.png -> missing.png"}));
  EXPECT_TRUE(l.unlisted.empty());
}

TEST_F(Inputs, RecursionKeepsSubfoldersAndSkipsTheOutputFolder) {
  touch("in/a.png");
  touch("in/sub/deeper/b.png");
  touch("in/out/a.png");  // the output of an earlier run into in/out
  touch("elsewhere/c.png");
  fs::create_directory_symlink(path("elsewhere"), path("in/link"));  // not followed
  const std::string in = path("in");
  const std::vector<std::string> want = {in + "/a.png -> a.png",
                                         in + "/sub/deeper/b.png -> sub/deeper/b.png"};
  EXPECT_EQ(pairs(histeq::list_inputs({in}, true, path("in/out")).files), want);
  // The same folder by another spelling, and through a link to it: still skipped.
  EXPECT_EQ(pairs(histeq::list_inputs({in}, true, path("in/sub/../out/")).files), want);
  fs::create_directory_symlink(path("in/out"), path("out-link"));
  EXPECT_EQ(pairs(histeq::list_inputs({in}, true, path("out-link")).files), want);
  // An output folder that does not exist yet, or elsewhere, skips nothing.
  const std::vector<std::string> all = {in + "/a.png -> a.png", in + "/out/a.png -> out/a.png",
                                        in + "/sub/deeper/b.png -> sub/deeper/b.png"};
  EXPECT_EQ(pairs(histeq::list_inputs({in}, true, path("new")).files), all);
  EXPECT_EQ(pairs(histeq::list_inputs({in}, true).files), all);
  // Without recursion the output folder's files are not reached anyway.
  EXPECT_EQ(pairs(histeq::list_inputs({in}, false, path("in/out")).files),
            (std::vector<std::string>{in + "/a.png -> a.png"}));
}

TEST_F(Inputs, OutputNamesWithFormatAndSuffix) {
  const std::vector<histeq::InputFile> files = {
      {"in/a.png", "a.png"}, {"in/sub/b.JPG", "sub/b.JPG"}, {"x.y/c.pgm", "c.pgm"}};
  histeq::OutputNaming own;
  EXPECT_EQ(outputs(histeq::plan_outputs(files, "out", own)),
            (std::vector<std::string>{"out/a.png", "out/sub/b.JPG", "out/c.pgm"}));
  histeq::OutputNaming suffixed{"", "-eq"};
  EXPECT_EQ(outputs(histeq::plan_outputs(files, "out/./x/..", suffixed)),
            (std::vector<std::string>{"out/a-eq.png", "out/sub/b-eq.JPG", "out/c-eq.pgm"}));
  histeq::OutputNaming tga{".tga", "-eq"};
  const std::vector<histeq::WorkItem> items = histeq::plan_outputs(files, "/o/", tga);
  EXPECT_EQ(outputs(items),
            (std::vector<std::string>{"/o/a-eq.tga", "/o/sub/b-eq.tga", "/o/c-eq.tga"}));
  for (const auto& w : items) EXPECT_EQ(w.format, ".tga");
  EXPECT_EQ(items[1].input, "in/sub/b.JPG");
  // A name without an extension takes the format; one that histeq cannot write needs it.
  const std::vector<histeq::InputFile> gif = {{"in/still.gif", "still.gif"}};
  EXPECT_EQ(outputs(histeq::plan_outputs(gif, "out", histeq::OutputNaming{".png", ""})),
            (std::vector<std::string>{"out/still.png"}));
  const std::string m = usage_error([&] { histeq::plan_outputs(gif, "out", own); });
  EXPECT_NE(m.find("cannot write 'in/still.gif' in its own format (.gif;"), std::string::npos) << m;
  EXPECT_NE(m.find(histeq::kGiveAnOutputFormat), std::string::npos) << m;
  EXPECT_EQ(m.find("--"), std::string::npos) << "no command-line option: " << m;
  EXPECT_NE(usage_error([&] { histeq::plan_outputs(files, "out", {".gif", ""}); }), "");
  EXPECT_NE(usage_error([&] { histeq::plan_outputs(files, "out", {"", "/x"}); }), "");
}

TEST_F(Inputs, TwoInputsWithOneOutputAreAnError) {
  const std::vector<histeq::InputFile> same = {{"a/x.png", "x.png"}, {"b/x.png", "x.png"}};
  std::string m = usage_error([&] { histeq::plan_outputs(same, "out", {}); });
  EXPECT_EQ(m,
            "'a/x.png' and 'b/x.png' would both write 'out/x.png'; rename one, or use "
            "separate runs");
  // Different extensions, one format: the same output.
  const std::vector<histeq::InputFile> stems = {{"c.bmp", "c.bmp"}, {"c.png", "c.png"}};
  EXPECT_EQ(histeq::plan_outputs(stems, "out", {}).size(), 2u);
  m = usage_error([&] { histeq::plan_outputs(stems, "out", {".tga", "-eq"}); });
  EXPECT_NE(m.find("would both write 'out/c-eq.tga'"), std::string::npos) << m;
  // Names equal once normalized collide too.
  const std::vector<histeq::InputFile> dots = {{"p", "./s/y.png"}, {"q", "s/y.png"}};
  EXPECT_NE(usage_error([&] { histeq::plan_outputs(dots, "out", {}); }), "");
}

TEST_F(Inputs, AnOutputThatIsAnotherInputIsAnErrorItsOwnIsNot) {
  // `histeq equalize e out/sub/a.png -r -o out`: e/sub/a.png's output is the second input, which
  // it would replace, read or not (the result depending on which worker came first).
  touch("e/sub/a.png");
  touch("out/sub/a.png");
  const std::string out = path("out");
  histeq::FilePlanOptions po;
  po.output_dir = out;
  po.recursive = true;
  const std::string m = usage_error([&] {
    histeq::plan_files({path("e"), path("out/sub/a.png")}, po);
  });
  EXPECT_EQ(m, "'" + path("e") + "/sub/a.png' would write '" + out +
                   "/sub/a.png', which is the input '" + path("out/sub/a.png") +
                   "' too; write the outputs into another folder, or use separate runs");
  // Through a symbolic link to that input: the same file.
  fs::create_symlink(path("out/sub/a.png"), path("link.png"));
  EXPECT_NE(usage_error([&] { histeq::plan_files({path("e"), path("link.png")}, po); }), "");
  // In place (the folder written into itself): each output is its own input, replaced once read.
  po.output_dir = path("e");
  const histeq::FilePlan own = histeq::plan_files({path("e")}, po);
  ASSERT_EQ(own.items.size(), 1u);
  EXPECT_EQ(own.items[0].output, path("e") + "/sub/a.png");
  // ... a hard link too: the rename over its name leaves the other name's file alone.
  fs::create_hard_link(path("e/sub/a.png"), path("e/sub/b.png"));
  EXPECT_EQ(histeq::plan_files({path("e")}, po).items.size(), 2u);
  // A symbolic link in the folder written in place would write its target, which the target's
  // own item writes too.
  fs::create_symlink("a.png", path("e/sub/l.png"));
  const std::string both = usage_error([&] { histeq::plan_files({path("e")}, po); });
  EXPECT_NE(both.find("would both write"), std::string::npos) << both;
  fs::remove(path("e/sub/l.png"));
  fs::remove(path("e/sub/b.png"));
  // Outputs that do not exist yet are no inputs.
  po.output_dir = path("fresh");
  EXPECT_EQ(histeq::plan_files({path("e"), path("out/sub/a.png")}, po).items.size(), 2u);
}

TEST_F(Inputs, WhatCannotBeListedIsNamedAndTheRestGoesOn) {
  touch("in/a.png");
  fs::create_symlink("loop.png", path("in/loop.png"));     // its type cannot be read
  fs::create_symlink("nowhere.png", path("in/gone.png"));  // dangling: not an image, no error
  // A folder whose path is longer than PATH_MAX: it cannot be opened by its path (root too).
  const std::string seg(200, 'd');
  std::string deep = path("in");
  int dir = ::open(deep.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  while (deep.size() < 4200) {
    ASSERT_EQ(::mkdirat(dir, seg.c_str(), 0755), 0);
    const int sub = ::openat(dir, seg.c_str(), O_RDONLY | O_DIRECTORY);
    ::close(dir);
    ASSERT_GE(sub, 0);
    dir = sub;
    deep += "/" + seg;
  }
  ::close(dir);
  histeq::FilePlanOptions po;
  po.output_dir = path("out");
  po.recursive = true;
  const histeq::FilePlan plan = histeq::plan_files({path("in"), path("photos")}, po);
  EXPECT_EQ(outputs(plan.items), (std::vector<std::string>{path("out/a.png")}));
  ASSERT_EQ(plan.unlisted.size(), 3u);
  std::vector<histeq::UnlistedInput::Kind> kinds;
  for (const auto& u : plan.unlisted) kinds.push_back(u.kind);
  EXPECT_EQ(kinds, (std::vector<histeq::UnlistedInput::Kind>{
                       histeq::UnlistedInput::Kind::entry, histeq::UnlistedInput::Kind::folder,
                       histeq::UnlistedInput::Kind::missing}));
  EXPECT_EQ(plan.unlisted[0].code, ELOOP);
  EXPECT_EQ(plan.unlisted[0].message(),
            "cannot read '" + path("in/loop.png") + "': Too many levels of symbolic links");
  EXPECT_EQ(plan.unlisted[1].code, ENAMETOOLONG);
  EXPECT_EQ(plan.unlisted[1].message().rfind("cannot list folder '" + path("in") + "/", 0), 0u);
  EXPECT_NE(plan.unlisted[1].message().find("': File name too long"), std::string::npos);
  EXPECT_EQ(plan.unlisted[2].code, ENOENT);
  EXPECT_EQ(plan.unlisted[2].path, path("photos"));
  EXPECT_EQ(plan.unlisted[2].message(), "no such folder (or file): '" + path("photos") + "'");
  // Nothing but what cannot be listed: an empty plan, no exception (the caller says what it is).
  const histeq::FilePlan none = histeq::plan_files({path("photos/")}, po);
  EXPECT_TRUE(none.items.empty());
  ASSERT_EQ(none.unlisted.size(), 1u);
  EXPECT_EQ(none.unlisted[0].kind, histeq::UnlistedInput::Kind::missing);
  EXPECT_TRUE(histeq::plan_files({}, po).items.empty());
  fs::remove_all(path("in"));  // TearDown's removal would stop at the long path
}

}  // namespace
