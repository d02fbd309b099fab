"""`gpu-admission completion bash|zsh|fish`: a shell completion script made from the parser.

The script is generated from the argparse tree of every command, so it completes what
the command takes today: commands and subcommands, each command's options, the
choices of an option or argument (`--output text|json|yaml|junit`), file and folder
names where a file or a folder of them is taken (`check FILE`, `policy test FILE|DIR`),
and folder names alone where only a folder is (a metavar DIR). It runs no Python at
completion time, so a Tab costs nothing. zsh runs the same function through its bash
completion layer (bashcompinit). fish gets `complete` lines of its own, each guarded by
the command typed so far (a small function of the script finds it, skipping options and
their values, as the bash function does).

    source <(gpu-admission completion bash)          # ~/.bashrc
    source <(gpu-admission completion zsh)           # ~/.zshrc, after compinit
    gpu-admission completion fish > ~/.config/fish/completions/gpu-admission.fish
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SHELLS = ("bash", "zsh", "fish")
FUNCTION = "_gpu_admission"
FOLDER_METAVARS = frozenset({"DIR", "DIRECTORY", "FOLDER"})
FILE_METAVARS = frozenset({"FILE", "PATH"})

Completion = str
"""How a value is completed: `files`, `folders`, `words:<w1 w2>`, or `` (nothing)."""


@dataclass(slots=True)
class CommandSpec:
    """What one command (`check`, `policy test`, or the top level, ``) takes."""

    path: str
    subcommands: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    values: dict[str, Completion] = field(default_factory=dict)
    """Each option taking a value -> how its value is completed."""
    positional: Completion = ""


def add_completion_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print a completion script for bash, zsh or fish. Load it with "
        "`source <(gpu-admission completion bash)` in ~/.bashrc (zsh: in ~/.zshrc, "
        "after compinit), or save the bash one as "
        "/etc/bash_completion.d/gpu-admission; fish: save it as "
        "~/.config/fish/completions/gpu-admission.fish.",
    )
    completion.add_argument("shell", choices=SHELLS)
    completion.set_defaults(run=_completion)


def _completion(args: argparse.Namespace) -> int:
    from webhook.cli.main import PROG, full_parser

    specs = list(command_specs(full_parser()))
    scripts = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}
    print(scripts[args.shell](PROG, specs), end="")
    return 0


def command_specs(parser: argparse.ArgumentParser, path: str = "") -> Iterator[CommandSpec]:
    """Each command of the tree under `parser`, the top level first."""
    spec = CommandSpec(path)
    children: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            children += action.choices.items()
        elif action.option_strings:
            spec.options += action.option_strings
            if action.nargs != 0:
                for option in action.option_strings:
                    spec.values[option] = _value_completion(action)
        elif not spec.positional:
            spec.positional = _value_completion(action)
    spec.subcommands = [name for name, _ in children]
    yield spec
    for name, child in children:
        yield from command_specs(child, f"{path} {name}".strip())


def _value_completion(action: argparse.Action) -> Completion:
    if action.choices is not None:
        return "words:" + " ".join(str(choice) for choice in action.choices)
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    if metavar in FOLDER_METAVARS:
        return "folders"
    if action.type is Path or metavar in FILE_METAVARS or action.dest in {"file", "files"}:
        return "files"
    return ""


def bash_script(prog: str, specs: list[CommandSpec], preamble: tuple[str, ...] = ()) -> str:
    """A bash completion function for `prog` and the `complete` line registering it;
    `preamble` opens the function's body."""
    # A command is keyed by its path and a word, space-separated: " check", "policy test".
    commands = [f'"{spec.path} {name}"' for spec in specs for name in spec.subcommands]
    value_options = [f'"{spec.path} {option}"' for spec in specs for option in spec.values]
    by_completion: dict[Completion, list[str]] = {}
    for spec in specs:
        for option, completion in spec.values.items():
            by_completion.setdefault(completion, []).append(f'"{spec.path} {option}"')
    value_cases = [
        f"        {'|'.join(keys)})\n            {_reply(completion)}; return ;;"
        for completion, keys in by_completion.items()
    ]
    option_cases = [
        f'            "{spec.path}") words="{" ".join(spec.options)}" ;;' for spec in specs
    ]
    word_cases = [
        f'        "{spec.path}") {_reply(_words(spec))} ;;'
        for spec in specs
        if spec.subcommands or spec.positional
    ]
    lines = [
        f"# {prog} completion for bash, made by `{prog} completion bash`.",
        f"# Load it with: source <({prog} completion bash)",
        f"{FUNCTION}() {{",
        *(f"    {line}" for line in preamble),
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="" command="" words="" i',
        '    (( COMP_CWORD > 0 )) && prev="${COMP_WORDS[COMP_CWORD-1]}"',
        "    local IFS=$'\\n'",
        "    COMPREPLY=()",
        "    # The command so far (`policy test`), skipping options and their values.",
        "    for (( i = 1; i < COMP_CWORD; i++ )); do",
        '        case "$command ${COMP_WORDS[i]}" in',
        f"            {'|'.join(commands)})",
        '                command="${command:+$command }${COMP_WORDS[i]}" ;;',
        f"            {'|'.join(value_options)})",
        "                (( i++ )) ;;",
        "        esac",
        "    done",
        '    case "$command $prev" in',
        *value_cases,
        "    esac",
        '    if [[ "$cur" == -* ]]; then',
        '        case "$command" in',
        *option_cases,
        "        esac",
        '        COMPREPLY=( $(IFS=" "; compgen -W "$words" -- "$cur") )',
        "        return",
        "    fi",
        '    case "$command" in',
        *word_cases,
        "    esac",
        "}",
        f"complete -F {FUNCTION} {prog}",
    ]
    return "\n".join(lines) + "\n"


def zsh_script(prog: str, specs: list[CommandSpec]) -> str:
    """The bash function, run by zsh's bash completion layer (which gives it bash's
    COMP_WORDS and COMP_CWORD, counted from 0 as with ksh_arrays; zsh filters the
    words offered by what is typed)."""
    function = bash_script(prog, specs, ("setopt local_options ksh_arrays",))
    return "\n".join(
        [
            f"# {prog} completion for zsh, made by `{prog} completion zsh`.",
            f"# Load it with: source <({prog} completion zsh), after compinit.",
            "autoload -U +X compinit && { (( $+functions[compdef] )) || compinit; }",
            "autoload -U +X bashcompinit && bashcompinit",
            function.split("\n", 2)[2],
        ]
    )


def fish_script(prog: str, specs: list[CommandSpec]) -> str:
    """fish `complete` lines for `prog`, each for the command typed so far."""
    finder = f"__{FUNCTION.lstrip('_')}_command"
    commands = " ".join(f"'{spec.path} {name}'" for spec in specs for name in spec.subcommands)
    value_options = " ".join(f"'{spec.path} {option}'" for spec in specs for option in spec.values)
    lines = [
        f"# {prog} completion for fish, made by `{prog} completion fish`.",
        f"# Save it as ~/.config/fish/completions/{prog}.fish",
        f"function {finder} --description 'the {prog} command typed so far'",
        "    set -l tokens (commandline -opc)",
        "    set -l command ''",
        "    set -l skip 0",
        "    for token in $tokens[2..-1]",
        "        if test $skip -eq 1",
        "            set skip 0",
        "            continue",
        "        end",
        '        set -l key "$command $token"',
        f"        if contains -- $key {commands}",
        "            set command (string trim -- $key)",
        f"        else if contains -- $key {value_options}",
        "            set skip 1",
        "        end",
        "    end",
        "    echo $command",
        "end",
        f"function {finder}_is --description 'whether the command typed so far is $argv[1]'",
        f"    set -l command ({finder})",
        '    test "$command" = "$argv[1]"',
        "end",
        f"complete -c {prog} -e",
    ]
    for spec in specs:
        when = f"""-n '{finder}_is "{spec.path}"'"""
        words = _words(spec)
        if words == "files":
            lines.append(f"complete -c {prog} {when} -F")
        elif words == "folders":
            lines.append(f"complete -c {prog} {when} -f -a '(__fish_complete_directories)'")
        else:
            listed = words.removeprefix("words:") if words.startswith("words:") else ""
            lines.append(f"complete -c {prog} {when} -f" + (f" -a '{listed}'" if listed else ""))
        lines += [f"complete -c {prog} {when} {_fish_option(spec, o)}" for o in spec.options]
    return "\n".join(lines) + "\n"


def _fish_option(spec: CommandSpec, option: str) -> str:
    name = f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}"
    completion = spec.values.get(option)
    if completion is None:
        return name
    if completion == "files":
        return f"{name} -r -F"
    if completion == "folders":
        return f"{name} -x -a '(__fish_complete_directories)'"
    if completion.startswith("words:"):
        return f"{name} -x -a '{completion.removeprefix('words:')}'"
    return f"{name} -x"


def _words(spec: CommandSpec) -> Completion:
    if spec.subcommands:
        return "words:" + " ".join(spec.subcommands)
    return spec.positional


def _reply(completion: Completion) -> str:
    """The bash statement filling COMPREPLY for the word being completed."""
    if completion == "files":
        return 'compopt -o filenames 2>/dev/null; COMPREPLY=( $(compgen -f -- "$cur") )'
    if completion == "folders":
        return 'compopt -o filenames 2>/dev/null; COMPREPLY=( $(compgen -d -- "$cur") )'
    if completion.startswith("words:"):
        words = completion.removeprefix("words:")
        return f'COMPREPLY=( $(IFS=" "; compgen -W "{words}" -- "$cur") )'
    return "COMPREPLY=()"
