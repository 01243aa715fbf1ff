// Fixture of the library_messages self-test: one literal names an option (line 5); the
// comments and the decrement below do not count.
// "--backend cuda" in a comment is not a message
void f(int n) {
  throw Error("--backend cuda: no device");  // planted
  --n;                                       // "--decoder gpu" in a trailing comment
  const char* ok = "no usable CUDA device for the cuda backend (";
}
