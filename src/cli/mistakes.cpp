// cli/mistakes.cpp — the answers to a user's common mistakes on the command line
// (cli/mistakes.hpp).
#include "cli/mistakes.hpp"

#include <map>

#include "histeq/error.hpp"

namespace histeq::cli {

namespace {

/// One option as the messages name it: "-o/--output" (names), "-o" (short_name, or ""), and
/// whether it takes a value.
struct OptionWord {
  std::string names;
  std::string short_name;
  bool takes_value = false;
};

/// The options of `options` by every word that names them: "--output", "-o".
std::map<std::string, OptionWord> option_words(const cxxopts::Options& options) {
  std::map<std::string, OptionWord> words;
  for (const std::string& g : options.groups()) {
    for (const cxxopts::HelpOptionDetails& o : options.group_help(g).options) {
      if (o.l.empty()) continue;
      OptionWord w{(o.s.empty() ? "" : "-" + o.s + "/") + "--" + o.l.front(),
                   o.s.empty() ? "" : "-" + o.s, !o.is_boolean && !o.has_implicit};
      for (const std::string& l : o.l) words["--" + l] = w;
      if (!o.s.empty()) words["-" + o.s] = w;
    }
  }
  return words;
}

/// The word before any "=VALUE".
std::string before_equals(const std::string& a) { return a.substr(0, a.find('=')); }

}  // namespace

void refuse_misread_options(const std::vector<std::string>& args, const cxxopts::Options& options,
                            const std::string& cmd) {
  const std::map<std::string, OptionWord> words = option_words(options);
  const OptionWord* wants_value = nullptr;  // the option whose value the next argument is
  for (const std::string& a : args) {
    if (a == "--") break;
    if (wants_value) {
      const auto it = words.find(before_equals(a));
      if (it != words.end() && a.size() > 1)
        throw UsageError(wants_value->names + " needs a value, and '" + a + "' is the option " +
                         it->second.names + " (a file named so: ./" + a + ") (see 'histeq " + cmd +
                         " --help')");
      wants_value = nullptr;
      continue;
    }
    if (a.size() > 2 && a[0] == '-' && a[1] != '-') {
      const auto it = words.find("-" + before_equals(a));
      if (it != words.end())
        throw UsageError(
            "'" + a + "': a long option takes two dashes: -" + a +
            (it->second.short_name.empty() ? "" : " (or " + it->second.short_name + ")") +
            " (see 'histeq " + cmd + " --help')");
    }
    const auto it = words.find(a);  // "--output" or "-o" alone: its value is the next argument
    if (it != words.end() && it->second.takes_value) wants_value = &it->second;
  }
}

}  // namespace histeq::cli
