// histeq/error.hpp — the exception types. Codes never travel far: a failure is turned into one
// of these where it happens, and main() is the one catch site (UsageError → exit 2, Error → 1).
#pragma once
#include <stdexcept>
#include <string>
#include <utility>

namespace histeq {

/// Any runtime failure (I/O, decode, CUDA, out of memory). The message names the thing and the
/// cause; it is printed once, by main(). Exit status 1.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A bad argument from the user: unknown option, kernel, mode, formula or output extension.
/// The message names the bad value and the valid choices. Exit status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// A file could not be read or written: `code` is the errno of the failure (ENOENT, EACCES,
/// EISDIR, ...) or 0 when none applies (a socket refused); `path` names the file. Exit status 1.
class FileError : public Error {
 public:
  FileError(const std::string& what, int code, std::string path)
      : Error(what), code_(code), path_(std::move(path)) {}
  int code() const noexcept { return code_; }
  const std::string& path() const noexcept { return path_; }

 private:
  int code_;
  std::string path_;
};

/// The bytes are not an image histeq can decode (empty, truncated, corrupt, an unknown format,
/// an inconsistent header, more pixels than allowed). Exit status 1.
class DecodeError : public Error {
 public:
  using Error::Error;
};

/// A failed CUDA runtime call: carries the call's text, file:line and the CUDA message.
class CudaError : public Error {
 public:
  CudaError(const std::string& what, int code) : Error(what), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// The device could not allocate what a stage needed. The message holds kGpuOutOfMemory and,
/// where known, how much was needed and free.
class DeviceOutOfMemory : public CudaError {
 public:
  using CudaError::CudaError;
};

// Phrases of the library's messages that a front end recognizes to add its own words (the CLI
// names its options; the Python package its arguments): the library speaks only of itself.
/// In every DeviceOutOfMemory message.
inline constexpr char kGpuOutOfMemory[] = "GPU out of memory";
/// The start of the Error thrown when Backend::cuda was asked for and no CUDA device is usable;
/// the cause and ")" follow.
inline constexpr char kNoDeviceForCuda[] = "no usable CUDA device for the cuda backend (";
/// The start of the Error thrown when GPU JPEG decoding was required and no CUDA device is
/// usable; the cause and ")" follow.
inline constexpr char kNoDeviceForGpuJpeg[] = "no usable CUDA device for GPU JPEG decoding (";

}  // namespace histeq
