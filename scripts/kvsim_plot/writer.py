"""Saving figures: pinned metadata (no dates, no random ids) and each figure's caption sidecar
FIG.txt (caption, source files, scenario hash, digest of the data)."""
import os

from .inputs import files_sha256


class Writer:
    """Saves figures with pinned metadata and writes each one's caption sidecar."""

    def __init__(self, plt, out_dir, fmt, provenance):
        self.plt, self.out_dir, self.fmt, self.provenance = plt, out_dir, fmt, provenance
        self.written = []

    def save(self, fig, name, caption, sources):
        path = os.path.join(self.out_dir, f"{name}.{self.fmt}")
        metadata = {
            "png": {"Software": None},
            "svg": {"Date": None, "Creator": None},
            "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
        }[self.fmt]
        fig.savefig(path, format=self.fmt, metadata=metadata)
        self.plt.close(fig)
        rel = [os.path.relpath(s, self.provenance["dir"]) for s in sources]
        text = (f"{caption}\n\nsource: {', '.join(sorted(rel))}\n"
                f"scenario_hash: {self.provenance['scenario_hash']}\n"
                f"data_sha256: {files_sha256(sources)}\n")
        with open(os.path.join(self.out_dir, f"{name}.txt"), "w") as f:
            f.write(text)
        self.written.append(path)


class FileWriter(Writer):
    """A Writer for one named figure FILE (its format from the extension)."""

    def __init__(self, plt, out_file, fmt, provenance):
        super().__init__(plt, os.path.dirname(out_file) or ".", fmt, provenance)
        self.name = os.path.splitext(os.path.basename(out_file))[0]
