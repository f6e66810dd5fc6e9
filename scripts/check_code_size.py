#!/usr/bin/env python3
"""The size rules of the house, checked on the project's own code (not tests/, not third-party):

  * a function (or method) body is at most 80 lines, counted from its signature's first line to
    its closing brace;
  * a source file is at most 450 lines.

Today's exceptions are listed in scripts/code_size_allowlist.txt, one per line:
  function <path> <qualified name> <lines>
  file <path> <lines>
The list may only shrink: an entry that grew, an entry no longer over its budget (or gone) and a
new offender all fail the check, so a refactor that shortens an exception must also lower or
drop its line. Prints one line per finding (path:line: what) and exits 1 if there is any.

Usage: check_code_size.py [ROOT] [--list]   (--list prints every function over the budget and
every file over its cap in the allowlist's format, for writing the list after a refactor.)

The function finder is a brace matcher over the source with comments, string and character
literals and preprocessor lines blanked: at namespace or class scope, a '{' whose header ends in
a parameter list (with qualifiers, a trailing return type or a constructor's initializer list)
opens a function; everything inside a function (lambdas, blocks) belongs to it.
"""
import os
import re
import sys

FUNCTION_BUDGET = 80
FILE_BUDGET = 450
SOURCE_DIRS = ("core", "models", "workloads", "kernels", "sim", "validate", "apps", "python",
               "bench")
SUFFIXES = (".cc", ".h", ".cu", ".cuh")


def blank_non_code(text):
    """Comments, literals and preprocessor lines become spaces; newlines stay, so lines count."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#":  # a directive, with its continuation lines
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        raw = re.match(r'R"([^(\s]*)\(', text[i:i + 20])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + raw.group(1) + '"'
            end = text.find(close, i + raw.end())
            end = n if end < 0 else end + len(close)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:end]))
            i = end
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
            continue
        if c == "\n":
            at_line_start = True
        out.append(c)
        i += 1
    return "".join(out)


FUNCTION_HEADER = re.compile(
    r"\)\s*(?:const|volatile|noexcept(?:\s*\([^()]*\))?|override|final|mutable|&|&&|\s)*"
    r"(?:->\s*[\w:<>,\s*&\[\]]+)?\s*$")
INIT_LIST = re.compile(r"\)\s*(?:noexcept\s*)?:(?!:)")
SCOPE_HEADER = re.compile(r"\b(namespace|class|struct|union|enum)\b|\bextern\s*\"\"")


def top_level(header):
    """The header with every parenthesised or braced part removed (where '=' may hide)."""
    depth, out = 0, []
    for c in header:
        if c in "({":
            depth += 1
        elif c in ")}":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
    return "".join(out)


def function_name(header):
    """The (qualified) name before the parameter list: the identifier before the first '('."""
    flat = " ".join(header.split())
    flat = re.sub(r"\b(__launch_bounds__|alignas|__attribute__)\s*\((?:[^()]|\([^()]*\))*\)", " ",
                  flat)
    m = re.search(r"((?:[\w~]+|operator\s*[^\s(]+)(?:\s*::\s*(?:[\w~]+|operator\s*[^\s(]+))*)"
                  r"\s*(?:<[^()]*>)?\s*\(", flat)
    if m:
        return re.sub(r"\s+", "", m.group(1))
    return flat[:40]


def strip_templates(flat):
    """The header without its `template <...>` prefixes (whose `class T` is no class scope)."""
    while True:
        m = re.search(r"\btemplate\s*<", flat)
        if not m:
            return flat
        depth, i = 1, m.end()
        while i < len(flat) and depth:
            depth += {"<": 1, ">": -1}.get(flat[i], 0)
            i += 1
        flat = flat[:m.start()] + " " + flat[i:]


def classify(header):
    """What a '{' at namespace or class scope opens: 'scope', 'function' or 'other'."""
    flat = strip_templates(" ".join(header.split()))
    outer = top_level(flat)
    if SCOPE_HEADER.search(outer):
        return "scope"
    if re.search(r"(?<![=!<>])=(?!=)", outer) and not re.search(r"\boperator\s*\S*=", flat):
        return "other"  # an initializer, or a lambda stored in a variable
    if INIT_LIST.search(flat):
        # In a constructor's initializer list, `member{` is a braced initializer; the body's
        # brace follows a member's closing parenthesis or brace.
        return "function" if flat.rstrip().endswith((")", "}")) else "other"
    if FUNCTION_HEADER.search(flat):
        return "function"
    return "other"


def functions(path):
    """Yields (name, first line, last line) of each function defined in the file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        code = blank_non_code(f.read())
    stack = []  # (kind, start line, name) per open brace
    header, header_line = [], None
    line = 1
    in_function = 0
    in_header_braces = 0  # braces of initializers inside a header (lambdas among them)
    for c in code:
        if c == "\n":
            line += 1
            if header:
                header.append(" ")
            continue
        if c == "{":
            if in_function:
                stack.append(("other", line, None))
                continue
            if in_header_braces:
                stack.append(("other-header", line, None))
                in_header_braces += 1
                header.append("{")
                continue
            text = "".join(header)
            kind = classify(text)
            if kind == "function":
                stack.append(("function", header_line or line, function_name(text)))
                in_function += 1
                header, header_line = [], None
            elif kind == "scope":
                stack.append(("scope", line, None))
                header, header_line = [], None
            else:  # a braced initializer inside a header: the header goes on
                stack.append(("other-header", line, None))
                in_header_braces += 1
                header.append("{")
            continue
        if c == "}":
            if not stack:
                continue
            kind, start, name = stack.pop()
            if kind == "function":
                in_function -= 1
                yield name, start, line
                header, header_line = [], None
            elif kind == "other-header":
                in_header_braces -= 1
                header.append("}")
            elif not in_function:
                header, header_line = [], None
            continue
        if in_function:
            continue
        if c == ";" and not in_header_braces:
            header, header_line = [], None
            continue
        if not header and c.isspace():
            continue
        if not header:
            header_line = line
        header.append(c)


def source_files(root):
    for top in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("build"))
            for name in sorted(filenames):
                if name.endswith(SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def measure(root):
    """{('function', path, name): lines, ('file', path, ''): lines} over the budgets."""
    found = {}
    for rel in source_files(root):
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8", errors="replace") as f:
            file_lines = sum(1 for _ in f)
        if file_lines > FILE_BUDGET:
            found[("file", rel, "")] = (file_lines, 1)
        for name, start, end in functions(path):
            length = end - start + 1
            if length > FUNCTION_BUDGET:
                key = ("function", rel, name)
                # Overloads of one name in one file: the longest stands for them.
                if key not in found or found[key][0] < length:
                    found[key] = (length, start)
    return found


def read_allowlist(path):
    allowed = {}
    if not os.path.exists(path):
        return allowed
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            text = raw.split("#", 1)[0].split()
            if not text:
                continue
            if text[0] == "function" and len(text) == 4:
                allowed[("function", text[1], text[2])] = (int(text[3]), number)
            elif text[0] == "file" and len(text) == 3:
                allowed[("file", text[1], "")] = (int(text[2]), number)
            else:
                print(f"{path}:{number}: expected 'function PATH NAME LINES' or 'file PATH LINES'")
                sys.exit(2)
    return allowed


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    found = measure(root)
    if "--list" in argv:
        for (kind, rel, name), (lines, _) in sorted(found.items()):
            print(f"function {rel} {name} {lines}" if kind == "function" else f"file {rel} {lines}")
        return 0
    allow_path = os.path.join(root, "scripts", "code_size_allowlist.txt")
    allowed = read_allowlist(allow_path)
    rel_allow = os.path.relpath(allow_path, root)
    bad = 0
    for key, (lines, start) in sorted(found.items()):
        kind, rel, name = key
        what = f"function {name}" if kind == "function" else "file"
        budget = FUNCTION_BUDGET if kind == "function" else FILE_BUDGET
        if key not in allowed:
            print(f"{rel}:{start}: {what} is {lines} lines (budget {budget}); shorten it")
            bad = 1
        elif lines > allowed[key][0]:
            print(f"{rel}:{start}: {what} grew to {lines} lines ({rel_allow}:{allowed[key][1]} "
                  f"allows {allowed[key][0]}; the list may only shrink)")
            bad = 1
        elif lines < allowed[key][0]:
            print(f"{rel_allow}:{allowed[key][1]}: {what} in {rel} is now {lines} lines: lower "
                  f"its entry to {lines}")
            bad = 1
    for key, (lines, number) in sorted(allowed.items(), key=lambda kv: kv[1][1]):
        if key not in found:
            print(f"{rel_allow}:{number}: {key[0]} {key[1]} {key[2]} is within its budget now "
                  f"(or gone): drop the entry")
            bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
