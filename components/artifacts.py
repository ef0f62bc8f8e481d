"""Writing rendered artifacts to disk (the only I/O of the rendering side; called on `up`, not preview)."""

from __future__ import annotations

from pathlib import Path

from components.render import Artifacts


def write_artifacts(out_dir: Path, artifacts: Artifacts) -> list[Path]:
    """Write every artifact under `out_dir` (created if needed), scripts executable; returns the paths.

    Files are replaced atomically, so a reader (or a delivery step) never sees half a script."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in sorted(artifacts.files().items()):
        path = out_dir / name
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o755 if name.endswith(".sh") else 0o644)
        tmp.replace(path)
        written.append(path)
    return written
