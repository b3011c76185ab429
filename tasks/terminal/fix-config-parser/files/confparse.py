"""Parse simple `key = value` configuration text.

Rules:
  * blank lines are ignored, and so are lines whose first non-blank character
    is `#` or `;` (comments);
  * every other line is `key = value`; the key is everything before the
    first `=`, the value everything after it (so values may contain `=`);
    whitespace around keys and values is removed;
  * keys are case-insensitive: they are returned in lowercase;
  * an unquoted value ends at an inline comment: ` #` (a space, then `#`);
  * a value in double quotes ("...") is taken literally without its quotes,
    so it may keep leading/trailing spaces and contain `#`; an inline
    comment may follow the closing quote;
  * when a key appears several times, the last value wins;
  * a non-comment line without `=` raises ValueError whose message contains
    `line N` (N = the 1-based line number).
"""


def parse(text):
    result = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#"):
            continue
        if "#" in line:
            line = line[: line.index("#")]
        parts = line.split("=")
        if len(parts) != 2:
            raise ValueError("bad line: " + line)
        key, value = parts
        value = value.strip().strip('"')
        if key not in result:
            result[key.strip()] = value
    return result
