"""Manifests read from folders and JSON files (webhook/offline/documents.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from webhook.offline.documents import (
    ManifestError,
    folder_manifests,
    manifest_names,
    read_json_documents,
    read_manifest_files,
)

POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec: {containers: []}\n"


def write(path: Path, text: str = POD) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace("NAME", path.stem), "utf-8")
    return path


class TestFolders:
    def test_a_folder_holds_its_manifests_at_any_depth_in_path_order(self, tmp_path: Path) -> None:
        for name in ["b.yaml", "a/z.yml", "a/b/c.json", "c.yaml", "a.yaml", "README.md", "x.txt"]:
            write(tmp_path / name)

        found = folder_manifests(tmp_path)

        assert [p.relative_to(tmp_path).as_posix() for p in found] == [
            "a/b/c.json", "a/z.yml", "a.yaml", "b.yaml", "c.yaml",
        ]  # fmt: skip

    def test_hidden_files_and_folders_are_left_out(self, tmp_path: Path) -> None:
        write(tmp_path / "app.yaml")
        write(tmp_path / ".hidden.yaml")
        write(tmp_path / ".git" / "config.yaml")
        write(tmp_path / "apps" / ".github" / "workflow.yml")

        assert folder_manifests(tmp_path) == [tmp_path / "app.yaml"]

    def test_a_folder_in_the_names_is_replaced_by_its_manifests_in_place(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path / "apps" / "one.yaml")
        write(tmp_path / "apps" / "two.yaml")
        single = write(tmp_path / "single.yaml")

        names = manifest_names(["-", str(tmp_path / "apps"), str(single)])

        assert names == ["-", str(tmp_path / "apps/one.yaml"), str(tmp_path / "apps/two.yaml"), str(single)]  # fmt: skip

    def test_a_folder_without_manifests_is_an_error_naming_it(self, tmp_path: Path) -> None:
        write(tmp_path / "notes.txt")

        with pytest.raises(ManifestError) as raised:
            manifest_names([str(tmp_path)])

        assert (
            str(raised.value) == f"{tmp_path}: no manifests (*.yaml, *.yml, *.json) in this folder"
        )

    def test_the_objects_of_a_folder_name_their_own_files(self, tmp_path: Path) -> None:
        write(tmp_path / "one.yaml")
        write(tmp_path / "sub" / "two.json", json.dumps(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "NAME"}}, indent="\t"
        ))  # fmt: skip

        documents = read_manifest_files([str(tmp_path)], io.StringIO())

        assert [(d.source, d.object["metadata"]["name"]) for d in documents] == [
            (str(tmp_path / "one.yaml"), "one"),
            (str(tmp_path / "sub" / "two.json"), "two"),
        ]


class TestJson:
    def test_a_json_file_indented_with_tabs_is_read(self) -> None:
        text = json.dumps(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, indent="\t"
        )

        [document] = read_json_documents(text, "pod.json")

        assert (document.source, document.line, document.object["kind"]) == ("pod.json", 1, "Pod")

    def test_objects_one_after_another_each_start_at_their_line(self) -> None:
        pod = json.dumps({"apiVersion": "v1", "kind": "Pod"}, indent=2)

        documents = read_json_documents(f"{pod}\n\n{pod}\n", "pods.json")

        assert [d.line for d in documents] == [1, 6]

    def test_a_list_stands_for_its_items(self) -> None:
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Pod"}, {"apiVersion": "v1", "kind": "Service"},
        ]})  # fmt: skip

        assert [d.object["kind"] for d in read_json_documents(text, "list.json")] == [
            "Pod",
            "Service",
        ]

    @pytest.mark.parametrize(
        ("text", "error"),
        [
            ('{"kind": "Pod",\n "spec": }', "bad.json:2: not valid JSON: Expecting value"),
            (
                '{"kind": "Pod", "kind": "Job"}',
                "bad.json:1: not valid JSON: found duplicate key 'kind'",
            ),
            ("\n[1, 2]", "bad.json:2: expected a Kubernetes object with apiVersion and kind"),
        ],
        ids=["syntax", "duplicate-key", "not-an-object"],
    )
    def test_what_is_not_a_json_object_is_an_error_at_its_line(self, text: str, error: str) -> None:
        with pytest.raises(ManifestError) as raised:
            read_json_documents(text, "bad.json")

        assert str(raised.value) == error

    def test_an_empty_json_file_holds_no_objects(self) -> None:
        assert read_json_documents(" \n", "empty.json") == []
