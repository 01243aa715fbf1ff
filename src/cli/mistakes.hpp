// cli/mistakes.hpp — the command line's answers to the mistakes a user coming from other tools
// makes: a long option written with one dash (ImageMagick's `-quality 90`), and an option where
// an option's value belongs (`-o --backend cpu`).
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

}  // namespace histeq::cli
