#!/usr/bin/env python3
"""scripts/check_kernel_sizes.py [ROOT] — the size limits of docs/architecture.md over kernels/ and
src/: no file over 800 lines, no function over 120 lines. kernels/ because clang-tidy does not
read it (.cu and .cuh are CUDA; clang-tidy checks only the host C++); src/ because clang-tidy's
readability-function-size holds its functions to 120 lines but nothing holds its files to 800.
Functions are counted in both trees; in src/ that repeats readability-function-size, and the
finder agrees with it there (no function of src/ reported that clang-tidy lets pass).

A function is a brace block opened at namespace or class scope whose header (the text since the
previous ';', '{' or '}' at that scope) ends with a parameter list and its qualifiers; its length
is the number of lines of its body, between the braces (as readability-function-size counts
them). Comments, string and character literals are blanked first, so their braces do not count.
Lambdas and nested blocks count towards the function that holds them. Prints each finding as
file:line and exits 1 when there is one. .ci/run runs it, and CTest (kernel_sizes).
With --self-test it checks itself on made-up sources instead (CTest kernel_sizes_selftest): a
function one line too long is found, one at the limit is not, and neither are braces in comments
and strings, lambdas, control blocks or class bodies; and in a made-up tree a file of src/ and
one of kernels/ one line over the file limit are found, files at the limit are not."""
import pathlib
import re
import sys
import tempfile

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120
SUFFIXES = {".cu", ".cuh", ".hpp", ".h", ".cpp"}
ROOTS = ("kernels", "src")  # the folders checked, under ROOT
SCOPE_WORDS = re.compile(r"\b(namespace|struct|class|union|enum)\b[^()]*$|extern\s+\"C\"\s*$")
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else)\s*(\(.*\))?\s*$", re.S)
FUNCTION_TAIL = re.compile(
    r"\)\s*((const|noexcept|override|final|mutable|volatile|&|&&)\s*|->\s*[\w:<>,\s*&]+)*$", re.S)


def blank_comments_and_strings(text):
    """The text with comments, strings and characters replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(text):
    """(line, body lines) of each function longer than MAX_FUNCTION_LINES."""
    code = blank_comments_and_strings(text)
    found = []
    stack = []  # per open brace: (kind, line of the brace)
    header_start = 0
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            header = code[header_start:i].strip()
            header = re.sub(r"^\s*#.*$", "", header, flags=re.M).strip()  # preprocessor lines
            at_scope = all(kind == "scope" for kind, _ in stack)
            if SCOPE_WORDS.search(header) and not header.endswith(")"):
                kind = "scope"
            elif at_scope and FUNCTION_TAIL.search(header) and not CONTROL.search(header):
                kind = "function"
            else:
                kind = "block"
            stack.append((kind, line))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, opened = stack.pop()
                body = line - opened - 1
                if kind == "function" and body > MAX_FUNCTION_LINES:
                    found.append((opened, body))
            header_start = i + 1
        elif c == ";":
            header_start = i + 1
    return found


def findings(root):
    """(files checked, findings as text) for the sources under ROOTS of root; None for the files
    when a root holds none (a wrong ROOT)."""
    bad = []
    count = 0
    for top in ROOTS:
        files = sorted(p for p in (root / top).rglob("*") if p.suffix in SUFFIXES)
        if not files:
            return None, [f"no sources under {root / top}"]
        count += len(files)
        for path in files:
            text = path.read_text(encoding="utf-8")
            rel = path.relative_to(root)
            lines = text.count("\n")
            if lines > MAX_FILE_LINES:
                bad.append(f"{rel}: {lines} lines (at most {MAX_FILE_LINES})")
            for at, body in long_functions(text):
                bad.append(f"{rel}:{at}: a function of {body} lines (at most {MAX_FUNCTION_LINES})")
    return count, bad


def self_test():
    """0 when long_functions finds exactly the planted function and findings exactly the planted
    files; else 1."""
    body = lambda n: "".join(f"  x += {i};\n" for i in range(n))
    text = (
        "// a comment with a brace { that opens nothing\n"
        "namespace a {\n"
        "struct S {\n"
        "  int f() const {\n" + body(3) + "  }\n"
        "};\n"
        "template <int k>\n"
        "__global__ void __launch_bounds__(256) at_limit(int x) {\n"
        + body(MAX_FUNCTION_LINES - 2) +
        "  auto l = [&](int y) { return y + 1; };\n"
        "  if (x) { const char* s = \"}}}\"; }\n"
        "}\n"
        "void too_long(int x)\n"
        "    noexcept {\n" + body(MAX_FUNCTION_LINES + 1) + "}\n"
        "}  // namespace a\n")
    found = long_functions(text)
    want_line = text.split("\n").index("    noexcept {") + 1
    if found != [(want_line, MAX_FUNCTION_LINES + 1)]:
        print(f"check_kernel_sizes self-test: found {found}, expected [({want_line}, "
              f"{MAX_FUNCTION_LINES + 1})]", file=sys.stderr)
        return 1
    lines = lambda n: "".join(f"int v{i} = {i};\n" for i in range(n))
    planted = {"kernels/fam/at_limit.cu": MAX_FILE_LINES,
               "kernels/fam/over.cuh": MAX_FILE_LINES + 1,
               "src/room/at_limit.cpp": MAX_FILE_LINES,
               "src/room/over.hpp": MAX_FILE_LINES + 1,
               "src/room/notes.txt": MAX_FILE_LINES + 1}  # not a source: not checked
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for rel, n in planted.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(lines(n), encoding="utf-8")
        _, bad = findings(root)
    over = f"{MAX_FILE_LINES + 1} lines (at most {MAX_FILE_LINES})"
    want = [f"{pathlib.Path('kernels/fam/over.cuh')}: {over}",
            f"{pathlib.Path('src/room/over.hpp')}: {over}"]
    if bad != want:
        print(f"check_kernel_sizes self-test: found {bad}, expected {want}", file=sys.stderr)
        return 1
    print("check_kernel_sizes self-test: the planted function and the two planted files found, "
          "nothing else")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    count, bad = findings(root)
    if count is None:
        print(f"check_kernel_sizes: {bad[0]}", file=sys.stderr)
        return 2
    for line in bad:
        print(line)
    if bad:
        return 1
    print(f"check_kernel_sizes: {count} files under {' and '.join(t + '/' for t in ROOTS)}, none "
          f"over {MAX_FILE_LINES} lines, no function over {MAX_FUNCTION_LINES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
