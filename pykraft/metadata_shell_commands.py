"""The commands of ``pykraft metadata-shell`` over a node tree: a line in, lines out.

Kafka's ``org.apache.kafka.shell.command`` handlers: ``ls``, ``cat``, ``cd``, ``find``, ``pwd``,
``tree``, ``history``, ``help``, ``exit``, with their messages (``cat: X: Is a directory``,
``cd: X: no such directory.``) and ``ls``'s column layout (``LsCommandHandler.printEntries``:
one column without a terminal, else as many columns as fit the screen width). Paths are
absolute or relative to the working directory, ``.`` and ``..`` work, and a component may be a
glob (``/image/topics/byName/*``), as Kafka's ``GlobVisitor`` allows.

Pure: ``run_command(state, line, screen_width)`` returns the output lines and changes only
``state`` (the working directory, the history); the shell around it reads lines and prints.
"""

from __future__ import annotations

import fnmatch
import shlex
from collections.abc import Callable, Sequence

import attrs

from pykraft import __version__
from pykraft.metadata.image_node import Directory, Leaf, Node, directory

GLOB_CHARACTERS = frozenset("*?[{")
# Commands, with Kafka's descriptions (each handler's ``description()``).
COMMANDS = {
    "cat": "Show the contents of metadata files.",
    "cd": "Set the current working directory.",
    "exit": "Exit the metadata shell.",
    "find": "Search for nodes in the directory hierarchy.",
    "help": "Display this help message.",
    "history": "Print command history.",
    "ls": "List metadata nodes.",
    "pwd": "Print the current working directory.",
    "tree": "Show the contents of metadata nodes in a tree structure.",
}
MAX_HISTORY = 10_000


def root_node(image: Directory) -> Directory:
    """``/``: the image and ``/local`` (the shell itself, Kafka's ``LocalShellNode``)."""
    return directory(
        {"image": lambda: image, "local": lambda: directory({"version": lambda: Leaf(__version__)})}
    )


@attrs.define
class ShellState:
    root: Directory
    # The working directory's components; [] is "/".
    working_directory: list[str] = attrs.field(factory=list)
    history: list[str] = attrs.field(factory=list)
    exited: bool = False

    def pwd(self) -> str:
        return "/" + "/".join(self.working_directory)


@attrs.frozen
class Match:
    """A node a path named: its absolute components and the node."""

    components: tuple[str, ...]
    node: Node

    def last_component(self) -> str:
        return self.components[-1] if self.components else "/"


def _split(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


def resolve(state: ShellState, path: str) -> list[Match]:
    """Every node ``path`` names (several when it holds globs), in sorted order."""
    parts = _split(path) if path.startswith("/") else [*state.working_directory, *_split(path)]
    matches = [Match((), state.root)]
    for part in parts:
        if part == ".":
            continue
        if part == "..":
            matches = [_parent(state, match) for match in matches]
            continue
        matches = [child for match in matches for child in _children(match, part)]
    return matches


def _parent(state: ShellState, match: Match) -> Match:
    components = match.components[:-1]
    node: Node = state.root
    for name in components:
        assert isinstance(node, Directory)
        found = node.child(name)
        assert found is not None, "a parent of a resolved node exists"
        node = found
    return Match(components, node)


def _children(match: Match, part: str) -> list[Match]:
    node = match.node
    if not isinstance(node, Directory):
        return []
    if GLOB_CHARACTERS.isdisjoint(part):
        child = node.child(part)
        return [] if child is None else [Match((*match.components, part), child)]
    pattern = _brace_patterns(part)
    found = []
    for name in node.child_names():
        if any(fnmatch.fnmatchcase(name, one) for one in pattern):
            child = node.child(name)
            assert child is not None
            found.append(Match((*match.components, name), child))
    return found


def _brace_patterns(part: str) -> list[str]:
    """``{a,b}`` alternatives (Kafka's ``GlobComponent``) as fnmatch patterns."""
    start = part.find("{")
    end = part.find("}", start)
    if start < 0 or end < 0:
        return [part]
    head, tail = part[:start], part[end + 1 :]
    return [head + choice + tail for choice in part[start + 1 : end].split(",")]


# ---------------------------------------------------------------------------- commands


def run_command(state: ShellState, line: str, screen_width: int | None = None) -> list[str]:
    """Run one command line; the lines it prints."""
    try:
        words = shlex.split(line)
    except ValueError as error:
        return [f"Error parsing command: {error}"]
    if not words:
        return []
    if len(state.history) < MAX_HISTORY:
        state.history.append(line.strip())
    name, args = words[0], words[1:]
    handler = HANDLERS.get(name)
    if handler is None:
        return [f"Unknown command {name!r}. Type help for the list of commands."]
    return handler(state, args, screen_width)


def _effective(paths: Sequence[str]) -> list[str]:
    # Kafka's CommandUtils.getEffectivePaths: empty ones dropped, none means ".".
    return [path for path in paths if path] or ["."]


def _ls(state: ShellState, args: Sequence[str], screen_width: int | None) -> list[str]:
    out: list[str] = []
    files: list[str] = []
    directories: list[tuple[str, list[str]]] = []
    for target in _effective(args):
        matches = resolve(state, target)
        if not matches:
            out.append(f"ls: {target}: no such file or directory.")
        for match in matches:
            if isinstance(match.node, Directory):
                directories.append((match.last_component(), match.node.child_names()))
            else:
                files.append(match.last_component())
    out += column_lines(files, screen_width)
    need_intro = bool(files) or len(directories) > 1
    first = not files
    for name, children in directories:
        intro = []
        if need_intro:
            intro = [f"{name}:"] if first else ["", f"{name}:"]
            first = False
        if children:  # Kafka prints no intro for an empty directory
            out += intro + column_lines(children, screen_width)
    return out


def column_lines(entries: Sequence[str], screen_width: int | None) -> list[str]:
    """Kafka's ``LsCommandHandler.printEntries``: column-major, each column 2 wider than its
    longest entry, the most columns that fit ``screen_width``."""
    if not entries:
        return []
    columns, per_column, widths = _column_schema(entries, screen_width)
    lines = []
    for row in range((len(entries) + columns - 1) // columns):
        text = ""
        for column in range(columns):
            index = row + column * per_column
            if index < len(entries):
                entry = entries[index]
                text += entry if column == columns - 1 else entry.ljust(widths[column])
        lines.append(text)
    return lines


def _column_schema(entries: Sequence[str], screen_width: int | None) -> tuple[int, int, list[int]]:
    one_column = (1, len(entries), [0])
    if screen_width is None or screen_width // 4 <= 1:
        return one_column
    for columns in range(screen_width // 4, 1, -1):
        per_column = (len(entries) + columns - 1) // columns
        widths = [0] * columns
        for index, entry in enumerate(entries):
            column = index // per_column
            widths[column] = max(widths[column], len(entry) + 2)
        if widths[-1] != 0 and sum(widths) <= screen_width:
            return columns, per_column, widths
    return one_column


def _cat(state: ShellState, args: Sequence[str], _: int | None) -> list[str]:
    if not args:
        return ["cat: the following arguments are required: targets"]
    out: list[str] = []
    for target in args:
        matches = resolve(state, target)
        if not matches:
            out.append(f"cat: {target}: No such file or directory.")
        for match in matches:
            if isinstance(match.node, Directory):
                out.append(f"cat: {target}: Is a directory")
            else:
                out.append(match.node.text)
    return out


def _cd(state: ShellState, args: Sequence[str], _: int | None) -> list[str]:
    if len(args) > 1:
        return ["cd: too many arguments."]
    target = args[0] if args else "/"
    matches = resolve(state, target)
    if not matches:
        return [f"cd: {target}: no such directory."]
    if not isinstance(matches[0].node, Directory):
        return [f"cd: {target}: not a directory."]
    state.working_directory = list(matches[0].components)
    return []


def _find(state: ShellState, args: Sequence[str], _: int | None) -> list[str]:
    out: list[str] = []
    for path in _effective(args):
        matches = resolve(state, path)
        if not matches:
            out.append(f"find: {path}: no such file or directory.")
        for match in matches:
            _find_under(path, match.node, out)
    return out


def _find_under(path: str, node: Node, out: list[str]) -> None:
    out.append(path)
    if isinstance(node, Directory):
        for name in node.child_names():
            child = node.child(name)
            assert child is not None
            _find_under(path + name if path.endswith("/") else f"{path}/{name}", child, out)


def _tree(state: ShellState, args: Sequence[str], _: int | None) -> list[str]:
    if not args:
        return ["tree: the following arguments are required: targets"]
    out: list[str] = []
    for target in args:
        matches = resolve(state, target)
        if not matches:
            out.append(f"tree: {target}: No such file or directory.")
        for match in matches:
            _print_node(match.node, 0, out)
    return out


def _print_node(node: Node, depth: int, out: list[str]) -> None:
    # Kafka's MetadataNode.print with ShellNodePrinter: "name:" then children two spaces in.
    indent = "  " * depth
    if isinstance(node, Leaf):
        out.append(indent + node.text)
        return
    for name in node.child_names():
        child = node.child(name)
        assert child is not None
        out.append(f"{indent}{name}:")
        _print_node(child, depth + 1, out)


def _pwd(state: ShellState, _: Sequence[str], __: int | None) -> list[str]:
    return [state.pwd()]


def _history(state: ShellState, args: Sequence[str], _: int | None) -> list[str]:
    try:
        count = int(args[0]) if args else len(state.history)
    except ValueError:
        return [f"history: {args[0]}: not a number."]
    first = max(0, len(state.history) - count)
    # Kafka's HistoryCommandHandler: "% 5d  %s", numbered from 1.
    return [f"{index + 1:>5}  {state.history[index]}" for index in range(first, len(state.history))]


def _help(_: ShellState, __: Sequence[str], ___: int | None) -> list[str]:
    lines = ["Welcome to the Apache Kafka metadata shell (pykraft).", ""]
    width = max(len(name) for name in COMMANDS) + 2
    return lines + [f"  {name.ljust(width)}{text}" for name, text in COMMANDS.items()]


def _exit(state: ShellState, _: Sequence[str], __: int | None) -> list[str]:
    state.exited = True
    return []


Handler = Callable[[ShellState, Sequence[str], "int | None"], list[str]]
HANDLERS: dict[str, Handler] = {
    "cat": _cat,
    "cd": _cd,
    "exit": _exit,
    "find": _find,
    "help": _help,
    "history": _history,
    "ls": _ls,
    "pwd": _pwd,
    "tree": _tree,
}
assert set(HANDLERS) == set(COMMANDS), "every command has a description"
