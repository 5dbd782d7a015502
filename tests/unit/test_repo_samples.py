"""The repository's own config/samples/: `kubectl apply -k` and `kubectl apply -f` both work."""

from __future__ import annotations

from pathlib import Path

import yaml

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"


def test_apply_f_reads_only_crs_and_apply_k_lists_them_all() -> None:
    # kubectl apply -f reads every .yaml/.yml/.json file: a kustomization.yaml there is sent to
    # the API server as an object and fails. Kustomize also reads a file named Kustomization.
    assert not (SAMPLES / "kustomization.yaml").exists()
    crs = sorted(p.name for p in SAMPLES.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    for name in crs:
        obj = yaml.safe_load((SAMPLES / name).read_text())
        assert obj["apiVersion"] and obj["kind"] != "Kustomization", name
    kustomization = yaml.safe_load((SAMPLES / "Kustomization").read_text())
    assert kustomization["kind"] == "Kustomization"
    assert sorted(kustomization["resources"]) == crs
