"""``FileSystemAPI``: a small in-memory file system with a working directory.

The tree is plain data, so the state checker can compare it with ``==`` and snapshots
can pickle it: a directory is a ``dict`` of name -> node, a file is its ``str`` content.
There is deliberately no delete operation.

Scenario config: ``{"tree": {...}, "cwd": "/path"}`` (``cwd`` defaults to ``/``).
"""

from __future__ import annotations

import copy
import difflib
import functools
import random
from typing import Any

#: fixed seed of the long-context filler, so both sides of the checker load equal trees
_LONG_CONTEXT_SEED = 20_240_917
_FILLER_WORDS = (
    "alpha beta gamma delta sample record entry status pending archived draft final "
    "review budget quarter summary meeting project backup config output input"
).split()

Node = dict[str, Any] | str


@functools.cache
def _filler_files() -> tuple[tuple[str, str], ...]:
    """The long-context filler files (the same every time: a fixed seed), made once."""
    rng = random.Random(_LONG_CONTEXT_SEED)
    files = []
    for i in range(40):
        lines = [" ".join(rng.choices(_FILLER_WORDS, k=8)) for _ in range(6)]
        files.append((f"filler_{i:03d}.log", "\n".join(lines)))
    return tuple(files)


class FileSystemAPI:
    """An in-memory file system: navigate, create, read, write, copy and move files."""

    def __init__(self) -> None:
        self.tree: dict[str, Node] = {}
        self.cwd: str = "/"

    def _load_scenario(self, config: dict[str, Any], long_context: bool = False) -> None:
        tree = config.get("tree", {})
        if not isinstance(tree, dict):
            raise ValueError("FileSystemAPI: 'tree' must be a JSON object")
        self.tree = copy.deepcopy(tree)
        self.cwd = "/"
        cwd = config.get("cwd", "/")
        parts = self._parts(cwd)
        if not isinstance(self._node(parts), dict):
            raise ValueError(f"FileSystemAPI: cwd {cwd!r} is not a directory of the tree")
        self.cwd = self._path(parts)
        if long_context:
            self._add_filler(self._node(parts))  # type: ignore[arg-type]

    # ---------------------------------------------------------------- helpers
    def _add_filler(self, directory: dict[str, Node]) -> None:
        for name, content in _filler_files():
            directory.setdefault(name, content)

    def _parts(self, path: str) -> list[str]:
        """Absolute path components of ``path`` (relative to the cwd unless it starts with /)."""
        base = [] if path.startswith("/") else [p for p in self.cwd.split("/") if p]
        for piece in path.split("/"):
            if piece in ("", "."):
                continue
            if piece == "..":
                if base:
                    base.pop()
            else:
                base.append(piece)
        return base

    @staticmethod
    def _path(parts: list[str]) -> str:
        return "/" + "/".join(parts)

    def _node(self, parts: list[str]) -> Node | None:
        node: Node = self.tree
        for part in parts:
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def _file(self, name: str, command: str) -> tuple[str | None, dict[str, str] | None]:
        node = self._node(self._parts(name))
        if node is None:
            return None, {"error": f"{command}: {name}: No such file or directory"}
        if isinstance(node, dict):
            return None, {"error": f"{command}: {name}: Is a directory"}
        return node, None

    def _parent(self, name: str, command: str) -> tuple[dict | None, str, dict | None]:
        parts = self._parts(name)
        if not parts:
            return None, "", {"error": f"{command}: {name}: invalid name"}
        parent = self._node(parts[:-1])
        if not isinstance(parent, dict):
            return None, "", {"error": f"{command}: {name}: No such directory"}
        return parent, parts[-1], None

    # ---------------------------------------------------------------- tools
    def pwd(self) -> dict[str, str]:
        """The current working directory."""
        return {"current_working_directory": self.cwd}

    def ls(self, a: bool = False) -> dict[str, list[str]]:
        """Names in the current directory; hidden ones (starting with '.') only if ``a``."""
        directory = self._node(self._parts("."))
        names = sorted(directory) if isinstance(directory, dict) else []
        if not a:
            names = [n for n in names if not n.startswith(".")]
        return {"current_directory_content": names}

    def cd(self, folder: str) -> dict[str, str]:
        """Change the working directory (a name, a relative path, '..' or an absolute path)."""
        parts = self._parts(folder)
        if not isinstance(self._node(parts), dict):
            return {"error": f"cd: {folder}: No such directory"}
        self.cwd = self._path(parts)
        return {"current_working_directory": self.cwd}

    def mkdir(self, dir_name: str) -> dict[str, str] | None:
        """Create a directory."""
        parent, name, error = self._parent(dir_name, "mkdir")
        if error:
            return error
        assert parent is not None
        if name in parent:
            return {"error": f"mkdir: cannot create directory '{dir_name}': File exists"}
        parent[name] = {}
        return None

    def touch(self, file_name: str) -> dict[str, str] | None:
        """Create an empty file (an existing file is left as it is)."""
        parent, name, error = self._parent(file_name, "touch")
        if error:
            return error
        assert parent is not None
        if isinstance(parent.get(name), dict):
            return {"error": f"touch: {file_name}: Is a directory"}
        parent.setdefault(name, "")
        return None

    def cat(self, file_name: str) -> dict[str, str]:
        """The content of a file."""
        content, error = self._file(file_name, "cat")
        return error or {"file_content": content or ""}

    def echo(self, content: str, file_name: str | None = None) -> dict[str, str] | None:
        """Print ``content``, or write it to ``file_name`` (replacing what was there)."""
        if file_name is None:
            return {"terminal_output": content}
        parent, name, error = self._parent(file_name, "echo")
        if error:
            return error
        assert parent is not None
        if isinstance(parent.get(name), dict):
            return {"error": f"echo: {file_name}: Is a directory"}
        parent[name] = str(content)
        return None

    def _transfer(self, source: str, destination: str, command: str, keep: bool) -> dict:
        src_parts = self._parts(source)
        node = self._node(src_parts)
        if node is None or not src_parts:
            return {"error": f"{command}: cannot stat '{source}': No such file or directory"}
        dst_parts = self._parts(destination)
        target = self._node(dst_parts)
        if isinstance(target, dict):
            dst_parts = [*dst_parts, src_parts[-1]]
            target = target.get(src_parts[-1])
        if target is not None:
            return {"error": f"{command}: '{self._path(dst_parts)}' already exists"}
        if dst_parts[: len(src_parts)] == src_parts:
            return {"error": f"{command}: cannot {command} '{source}' into itself"}
        parent = self._node(dst_parts[:-1])
        if not isinstance(parent, dict) or not dst_parts:
            return {"error": f"{command}: '{destination}': No such directory"}
        parent[dst_parts[-1]] = copy.deepcopy(node) if keep else node
        if not keep:
            src_parent = self._node(src_parts[:-1])
            assert isinstance(src_parent, dict)
            del src_parent[src_parts[-1]]
        verb = "copied" if keep else "moved"
        return {"result": f"'{source}' {verb} to '{self._path(dst_parts)}'"}

    def mv(self, source: str, destination: str) -> dict[str, str]:
        """Move or rename a file or directory (into ``destination`` if it is a directory)."""
        return self._transfer(source, destination, "mv", keep=False)

    def cp(self, source: str, destination: str) -> dict[str, str]:
        """Copy a file or directory (into ``destination`` if it is a directory)."""
        return self._transfer(source, destination, "cp", keep=True)

    def grep(self, file_name: str, pattern: str) -> dict[str, Any]:
        """Lines of a file that contain ``pattern``."""
        content, error = self._file(file_name, "grep")
        if error:
            return error
        return {"matching_lines": [line for line in (content or "").split("\n") if pattern in line]}

    def wc(self, file_name: str, mode: str = "l") -> dict[str, Any]:
        """Count the lines ('l'), words ('w') or characters ('c') of a file."""
        content, error = self._file(file_name, "wc")
        if error:
            return error
        text = content or ""
        if mode == "l":
            return {"count": len(text.split("\n")) if text else 0, "type": "lines"}
        if mode == "w":
            return {"count": len(text.split()), "type": "words"}
        if mode == "c":
            return {"count": len(text), "type": "characters"}
        return {"error": f"wc: invalid mode '{mode}' (use 'l', 'w' or 'c')"}

    def sort(self, file_name: str) -> dict[str, str]:
        """The lines of a file in sorted order (the file is not changed)."""
        content, error = self._file(file_name, "sort")
        return error or {"sorted_content": "\n".join(sorted((content or "").split("\n")))}

    def tail(self, file_name: str, lines: int = 10) -> dict[str, str]:
        """The last ``lines`` lines of a file."""
        content, error = self._file(file_name, "tail")
        if error:
            return error
        if lines < 0:
            return {"error": "tail: the number of lines must not be negative"}
        kept = (content or "").split("\n")[-lines:] if lines else []
        return {"last_lines": "\n".join(kept)}

    def diff(self, file_name1: str, file_name2: str) -> dict[str, str]:
        """Line-by-line differences between two files ('- ' only in the first, '+ ' only in the second)."""
        first, error = self._file(file_name1, "diff")
        if error:
            return error
        second, error = self._file(file_name2, "diff")
        if error:
            return error
        changed = [
            line
            for line in difflib.ndiff((first or "").split("\n"), (second or "").split("\n"))
            if line.startswith(("- ", "+ "))
        ]
        return {"diff_lines": "\n".join(changed)}

    def find(self, path: str = ".", name: str | None = None) -> dict[str, Any]:
        """Paths under ``path`` (relative to it) whose last component contains ``name``."""
        start = self._node(self._parts(path))
        if not isinstance(start, dict):
            return {"error": f"find: '{path}': No such directory"}
        found: list[str] = []
        stack: list[tuple[str, dict[str, Node]]] = [(path.rstrip("/") or "/", start)]
        while stack:
            prefix, directory = stack.pop()
            for entry in sorted(directory):
                full = f"{prefix}/{entry}" if prefix != "/" else f"/{entry}"
                if name is None or name in entry:
                    found.append(full)
                child = directory[entry]
                if isinstance(child, dict):
                    stack.append((full, child))
        return {"matches": sorted(found)}
