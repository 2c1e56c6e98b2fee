"""Screenshots for docs/img from a real run: the MLflow comparison of the variants and the DVC plots.

    .venv/bin/python scripts/screenshots.py [--repo .] [--out docs/img] [--chromium chromium]

Run it in a checkout after `make run` (it reads that checkout's mlflow.db and dvc.yaml plots). It needs
a headless Chromium (Debian: `apt-get install chromium`). DVC's HTML loads Vega from a CDN, so for
the plots it fetches Vega, Vega-Lite and Vega-Embed from the npm registry (`npm pack`) into a temporary
folder and renders `dvc plots show` with a template that loads them from there.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
VEGA_PACKAGES = {"vega@5": "vega.min.js", "vega-lite@5": "vega-lite.min.js", "vega-embed@6": "vega-embed.min.js"}
TEMPLATE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>DVC plots</title>
<script src="vega.min.js"></script><script src="vega-lite.min.js"></script><script src="vega-embed.min.js"></script>
<style>body {{ font-family: sans-serif; }} div {{ display: inline-block; margin: 6px; }}</style>
</head><body>
{plot_divs}
</body></html>
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def screenshot(chromium: str, url: str, path: Path, size: str = "1600,1000", wait_ms: int = 20000) -> Path:
    """A headless Chromium screenshot of ``url`` after ``wait_ms`` of virtual time (the page's scripts run)."""
    subprocess.run([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={size}", f"--virtual-time-budget={wait_ms}", f"--screenshot={path}", url],
                   check=True, capture_output=True, timeout=180)
    print(f"wrote {path}")
    return path


def latest_runs(tracking_uri: str, experiment: str) -> tuple[str, list[str]]:
    """(experiment id, the newest FINISHED run id per run name) of one experiment."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"no MLflow experiment {experiment!r} in {tracking_uri}; run `make run` first")
    runs = client.search_runs([found.experiment_id], "attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"])
    newest: dict[str, str] = {}
    for run in runs:
        newest.setdefault(run.info.run_name, run.info.run_id)
    return found.experiment_id, list(newest.values())


def mlflow_screenshots(repo: Path, out: Path, chromium: str) -> None:
    """The evaluation runs' chart view (headline section first), the self-play runs' charts and the evaluation
    runs' comparison table, from the MLflow UI."""
    uri = f"sqlite:///{repo / 'mlflow.db'}"
    port = free_port()
    server = subprocess.Popen([str(BIN / "mlflow"), "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
                               "--port", str(port)], cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2)
                break
            except OSError:
                time.sleep(1)
        experiment_id, _ = latest_runs(uri, "searchplay-evaluate")  # the README's view: headline charts first
        screenshot(chromium, f"{base}/#/experiments/{experiment_id}/runs?compareRunsMode=CHART",
                   out / "mlflow_headline_charts.png", size="1900,1000", wait_ms=90000)
        for experiment, name in (("searchplay-selfplay", "mlflow_selfplay_compare.png"),
                                 ("searchplay-evaluate", "mlflow_evaluate_compare.png")):
            experiment_id, run_ids = latest_runs(uri, experiment)
            query = urllib.parse.urlencode({"runs": json.dumps(run_ids), "experiments": json.dumps([experiment_id])})
            screenshot(chromium, f"{base}/#/compare-runs?{query}", out / name, size="1600,1400")
    finally:
        server.terminate()
        server.wait(30)


def vega_scripts(folder: Path) -> None:
    """vega.min.js, vega-lite.min.js and vega-embed.min.js from the npm registry into ``folder``."""
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(["npm", "pack", "--silent", *VEGA_PACKAGES], cwd=work, check=True, capture_output=True,
                       timeout=300)
        for tarball in Path(work).glob("*.tgz"):
            with tarfile.open(tarball) as archive:
                for member in archive.getmembers():
                    if Path(member.name).name in VEGA_PACKAGES.values() and "/build/" in member.name:
                        (folder / Path(member.name).name).write_bytes(archive.extractfile(member).read())
    missing = [name for name in VEGA_PACKAGES.values() if not (folder / name).is_file()]
    if missing:
        raise SystemExit(f"npm pack gave no {missing}; is the npm registry reachable?")


def dvc_plots_screenshot(repo: Path, out: Path, chromium: str) -> None:
    """`dvc plots show` (dvc.yaml's top-level plots) rendered offline with a local-Vega template."""
    with tempfile.TemporaryDirectory() as work:
        plots = Path(work) / "plots"
        plots.mkdir()
        template = Path(work) / "template.html"
        template.write_text(TEMPLATE, encoding="utf-8")
        subprocess.run([str(BIN / "dvc"), "plots", "show", "--html-template", str(template), "-o", str(plots)],
                       cwd=repo, check=True, capture_output=True, timeout=300)
        vega_scripts(plots)
        screenshot(chromium, (plots / "index.html").as_uri(), out / "dvc_plots.png", size="1600,1900")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=Path("."), help="a checkout after `make run`")
    parser.add_argument("--out", type=Path, default=Path("docs/img"))
    parser.add_argument("--chromium", default="chromium", help="a Chromium or Chrome executable")
    args = parser.parse_args()
    if shutil.which(args.chromium) is None:
        raise SystemExit(f"no {args.chromium!r} on PATH; install Chromium (Debian: apt-get install chromium)")
    args.out.mkdir(parents=True, exist_ok=True)
    repo = args.repo.resolve()
    mlflow_screenshots(repo, args.out.resolve(), args.chromium)
    dvc_plots_screenshot(repo, args.out.resolve(), args.chromium)


if __name__ == "__main__":
    main()
