"""`dvc plots show` offline: a page template with Vega, Vega-Lite and vega-embed inline.

DVC's default page loads the three scripts from a CDN, so offline it is blank. ``.dvc/config`` names
``plots-offline.html`` as ``plots.html_template`` (DVC resolves it against ``.dvc/``), and
``searchplay assets`` writes it there from a PyPI package that carries the scripts, installed like the
other embedded assets (``pip install --no-deps --target``, sha256-checked, never imported).
"""

from __future__ import annotations

from pathlib import Path

from searchplay.assets import Asset, AssetError, install, package_dir, verify

# Vega 5.33, Vega-Lite 5.23 and vega-embed 6.29 in one file (globals vega, vegaLite, vegaEmbed)
VEGA = Asset("vega-js", "django-js-lib-vega-embed", "6.29.0.3",
             "js_lib_vega_embed/static/js_lib_vega_embed/vega-embed-full.js",
             "b6f62605c995662b5682ff986bddf3a1e2fe7f309b8acc82db8b8a4feb4d9cef")
TEMPLATE = Path(".dvc") / "plots-offline.html"
# DVC fills {plot_divs} (and {refresh_tag}); with no {scripts} placeholder its CDN script tags are left out
PAGE = """<!DOCTYPE html>
<html>
<head>
    <meta charset="utf-8">
    {refresh_tag}
    <title>DVC Plot</title>
    <script>/* %s */
%s
    </script>
    <style>
        table {
            border-spacing: 15px;
        }
    </style>
</head>
<body>
    {plot_divs}
</body>
</html>
"""


def dvc_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` that holds a ``.dvc`` folder."""
    return next((folder for folder in (start, *start.parents) if (folder / ".dvc").is_dir()), None)


def vega_js_path() -> Path:
    """The installed vega-embed bundle, or ``AssetError`` naming the command that installs it."""
    path = package_dir(VEGA) / VEGA.relative_path
    if not verify(VEGA):
        raise AssetError(f"{VEGA.requirement} is missing at {path}; run `searchplay assets` (or `make setup`)")
    return path


def template_html() -> str:
    """DVC's plots page with the scripts inline instead of script tags that load them from a CDN."""
    script = vega_js_path().read_text(encoding="utf-8").replace("</script", "<\\/script")
    return PAGE % (VEGA.requirement, script)


def write_template(root: Path) -> bool:
    """Write ``<root>/.dvc/plots-offline.html``; False when it is already up to date."""
    path = root / TEMPLATE
    html = template_html()
    if path.is_file() and path.read_text(encoding="utf-8") == html:
        return False
    path.write_text(html, encoding="utf-8")
    return True


def ensure_template(root: Path) -> list[str]:
    """Install the scripts' package and write the template; returns what was done (empty: nothing to do)."""
    done = [f"installed {VEGA.requirement}"] if install(VEGA) else []
    if write_template(root):
        done.append(f"wrote {root / TEMPLATE} for `dvc plots show`")
    return done
