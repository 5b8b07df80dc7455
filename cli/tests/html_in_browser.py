"""html_in_browser.py REPORT.html SCREENSHOT.png: loads an `attncheck check --html` report of a
finding in Debian's chromium, headless, and passes when it rendered: the DOM holds the three
heatmaps with their cells, the screenshot is neither blank nor one color and shows the heatmaps'
reds, the page asks for nothing outside itself, and the browser logged no console message (the
page has no script: any message is an error). Standard library only."""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib


def fail(reason):
    print("html_in_browser: " + reason)
    sys.exit(1)


def chromium(profile, *args):
    """Runs headless chromium on its own profile; returns its stdout and its log (stderr)."""
    command = ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile,
               "--enable-logging=stderr", "--v=0", *args]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        fail("chromium exited with %d: %s" % (run.returncode, run.stderr[-2000:]))
    return run.stdout, run.stderr


def pixels(path):
    """The PNG's width, height and rows of (r, g, b) bytes: 8-bit RGB or RGBA, not interlaced."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + ": not a PNG")
    at, idat = 8, b""
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    if depth != 8 or color not in (2, 6) or interlace:
        fail("%s: PNG of depth %d, color type %d, interlace %d: expected 8-bit RGB or RGBA" % (path, depth, color, interlace))
    step = 3 if color == 2 else 4
    raw, stride, rows, above = zlib.decompress(idat), width * step, [], bytearray(width * step)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for x in range(step, stride):
                line[x] = (line[x] + line[x - step]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, above))
        elif kind == 3:
            for x in range(stride):
                line[x] = (line[x] + ((line[x - step] if x >= step else 0) + above[x]) // 2) & 255
        elif kind == 4:
            for x in range(stride):
                a = line[x - step] if x >= step else 0
                b, c = above[x], above[x - step] if x >= step else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line[x] for x in range(stride) if x % step < 3) if step == 4 else bytes(line))
        above = line
    return width, height, rows


def main():
    if len(sys.argv) != 3:
        fail("usage: html_in_browser.py REPORT.html SCREENSHOT.png")
    report, screenshot = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if not shutil.which("chromium"):
        fail("chromium not found: apt-get install -y chromium (ci/lib.sh lists it)")
    html = open(report, encoding="utf-8").read()
    # Self-contained: nothing to fetch (the SVG namespace URI is a name, not a request; a link to a
    # place in the page, href="#...", fetches nothing).
    outside = re.findall(r"""(?:\bsrc\s*=|\bhref\s*=\s*(?!["']?#)|url\(|@import|<script|<link)[^>]{0,60}""", html, re.I)
    if outside:
        fail("the page refers outside itself or runs script: " + "; ".join(outside[:3]))

    profile = tempfile.mkdtemp(prefix="attncheck-chromium-")
    try:
        url = "file://" + report
        dom, dom_log = chromium(profile, "--dump-dom", url)
        if os.path.exists(screenshot):
            os.remove(screenshot)
        _, shot_log = chromium(profile, "--screenshot=" + screenshot, "--window-size=1200,1600", url)
    finally:
        shutil.rmtree(profile, ignore_errors=True)

    console = [line for line in (dom_log + shot_log).splitlines() if ":CONSOLE" in line]
    if console:
        fail("console messages while loading the page:\n" + "\n".join(console))
    for name in ("heatmap-mask", "heatmap-weights", "heatmap-error"):
        svg = re.search(r'<svg[^>]*\bid="%s".*?</svg>' % name, dom, re.S)
        if not svg:
            fail("the rendered DOM has no heatmap #" + name)
        cells = svg.group(0).count('class="cell"')
        if cells == 0:
            fail("heatmap #%s has no cells" % name)
        print("heatmap #%s: %d cells" % (name, cells))

    if not os.path.exists(screenshot) or os.path.getsize(screenshot) < 2000:
        fail("no screenshot, or a tiny one: " + screenshot)
    width, height, rows = pixels(screenshot)
    counts, reds, blues = {}, 0, 0
    for row in rows:
        for x in range(0, len(row), 3):
            r, g, b = row[x], row[x + 1], row[x + 2]
            counts[(r, g, b)] = counts.get((r, g, b), 0) + 1
            reds += r - max(g, b) > 60
            blues += b - r > 40
    most = max(counts.values())
    print("screenshot %dx%d: %d colors, the commonest on %.1f%% of it, %d red and %d blue pixels"
          % (width, height, len(counts), 100.0 * most / (width * height), reds, blues))
    if len(counts) < 16 or most > 0.99 * width * height:
        fail("the screenshot is blank or nearly one color")
    if reds < 1000:
        fail("the screenshot shows no heatmap: fewer than 1000 red pixels")
    print("html_in_browser: PASS")


main()
