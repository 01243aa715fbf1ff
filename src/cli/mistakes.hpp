// cli/mistakes.hpp — the command line's answers to the mistakes a user coming from other tools
// makes: a long option written with one dash (ImageMagick's `-quality 90`), an option where an
// option's value belongs (`-o --backend cpu`), and a mistyped command or option name (the name
// it most likely meant, for "did you mean" in the messages).
// Room cli (docs/architecture.md): not installed.
#pragma once
#include <string>
#include <vector>

#include <cxxopts.hpp>

namespace histeq::cli {

/// Refuses (UsageError) two spellings that cxxopts would read otherwise than meant, before it
/// parses `args` (the arguments after the command word `cmd`; those after "--" are not looked
/// at):
/// - a long option of `options` written with one dash, `-quality 90` or `-output=x.png`: cxxopts
///   reads it as the short option -q with the value "uality" (or -o "utput");
/// - a value-taking option followed by another option of `options` instead of its value,
///   `-o --backend cpu`: cxxopts takes "--backend" as the output (a file of that name is still
///   written `./--backend`).
void refuse_misread_options(const std::vector<std::string>& args, const cxxopts::Options& options,
                            const std::string& cmd);

/// The name in `names` that `typed` most likely meant, or "" when none is close: the same name in
/// another case, else the one name that begins with `typed` (at least two characters besides the
/// dashes), else the one name nearest to it within about one edit per four characters (an edit:
/// a character added, removed, changed, or two neighbours swapped).
std::string closest_name(const std::string& typed, const std::vector<std::string>& names);

/// " (did you mean 'NAME'?)" for closest_name, or "".
std::string did_you_mean(const std::string& typed, const std::vector<std::string>& names);

}  // namespace histeq::cli
