// cli/mistakes.cpp — the answers to a user's common mistakes on the command line
// (cli/mistakes.hpp).
#include "cli/mistakes.hpp"

#include <algorithm>
#include <cstddef>
#include <map>

#include "cli/options.hpp"
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

/// The edits that turn a into b (optimal string alignment: a swap of neighbours is one edit).
std::size_t edits(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t change = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + change});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

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
    if (a.size() > 2 && a[0] == '-' && a[1] != '-' && a[2] == '=') {  // "-o=out.png"
      const auto it = words.find(a.substr(0, 2));
      if (it != words.end() && it->second.takes_value) {
        const std::string& names = it->second.names;
        const std::string value = a.substr(3);
        throw UsageError(
            "'" + a + "': a short option's value follows it without '=' (it would be '=" + value +
            "'): " + a.substr(0, 2) + " " + value + ", or " + names.substr(names.find('/') + 1) +
            "=" + value + " (see 'histeq " + cmd + " --help')");
      }
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

std::string closest_name(const std::string& typed, const std::vector<std::string>& names) {
  const std::size_t dashes = std::min(typed.find_first_not_of('-'), typed.size());
  if (typed.size() - dashes < 2) return "";
  for (const std::string& n : names)
    if (lower(n) == lower(typed)) return n;
  std::vector<std::string> begun;
  for (const std::string& n : names)
    if (n.size() > typed.size() && n.compare(0, typed.size(), typed) == 0) begun.push_back(n);
  if (begun.size() == 1) return begun.front();
  const std::size_t most = std::max<std::size_t>(1, (typed.size() - dashes + 2) / 4);
  std::string best;
  std::size_t best_edits = most + 1;
  bool tie = false;
  for (const std::string& n : names) {
    const std::size_t e = edits(lower(typed), lower(n));
    if (e < best_edits) {
      best = n;
      best_edits = e;
      tie = false;
    } else if (e == best_edits) {
      tie = true;
    }
  }
  return tie ? std::string() : best;
}

std::string did_you_mean(const std::string& typed, const std::vector<std::string>& names) {
  const std::string n = closest_name(typed, names);
  return n.empty() ? std::string() : " (did you mean '" + n + "'?)";
}

}  // namespace histeq::cli
