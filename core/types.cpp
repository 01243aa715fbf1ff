// types.cpp — names of the enums of types.hpp, for the command line, reports and JSON.
#include "histeq/types.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "histeq/error.hpp"

namespace histeq {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

[[noreturn]] void bad_choice(const char* what, std::string_view value, const char* choices) {
  throw UsageError("unknown " + std::string(what) + " '" + std::string(value) +
                   "' (valid: " + choices + ")");
}

}  // namespace

const char* to_string(SampleType t) {
  switch (t) {
    case SampleType::u8: return "u8";
    case SampleType::i32: return "i32";
  }
  return "?";
}

SampleType parse_sample_type(std::string_view s) {
  const std::string v = lower(s);
  if (v == "u8") return SampleType::u8;
  if (v == "i32" || v == "int32") return SampleType::i32;
  bad_choice("sample type", s, "u8, i32");
}

const char* to_string(Mode m) {
  switch (m) {
    case Mode::luma: return "luma";
    case Mode::rgb: return "rgb";
    case Mode::gray: return "gray";
  }
  return "?";
}

Mode parse_mode(std::string_view s) {
  const std::string v = lower(s);
  if (v == "luma") return Mode::luma;
  if (v == "rgb") return Mode::rgb;
  if (v == "gray") return Mode::gray;
  bad_choice("mode", s, "luma, rgb, gray");
}

const char* to_string(ChannelOrder o) { return o == ChannelOrder::bgr ? "bgr" : "rgb"; }

ChannelOrder parse_channel_order(std::string_view s) {
  const std::string v = lower(s);
  if (v == "rgb") return ChannelOrder::rgb;
  if (v == "bgr") return ChannelOrder::bgr;
  bad_choice("channel order", s, "rgb, bgr");
}

const char* to_string(Formula f) {
  switch (f) {
    case Formula::opencv: return "opencv";
    case Formula::exact: return "exact";
  }
  return "?";
}

Formula parse_formula(std::string_view s) {
  const std::string v = lower(s);
  if (v == "opencv") return Formula::opencv;
  if (v == "exact") return Formula::exact;
  bad_choice("formula", s, "opencv, exact");
}

const char* to_string(Backend b) {
  switch (b) {
    case Backend::automatic: return "auto";
    case Backend::cuda: return "cuda";
    case Backend::cpu: return "cpu";
  }
  return "?";
}

Backend parse_backend(std::string_view s) {
  const std::string v = lower(s);
  if (v == "auto") return Backend::automatic;
  if (v == "cuda") return Backend::cuda;
  if (v == "cpu") return Backend::cpu;
  bad_choice("backend", s, "auto, cuda, cpu");
}

}  // namespace histeq
