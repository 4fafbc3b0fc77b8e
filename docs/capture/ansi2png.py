#!/usr/bin/env python3
"""Render a `tmux capture-pane -p -e` capture (text with SGR colour codes)
to a PNG through ImageMagick, one character per grid cell.

    ansi2png.py capture.ansi out.png
"""
import re
import subprocess
import sys

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"
SIZE, CELL_W, CELL_H, PAD = 15, 9.04, 20, 14
BG, FG, DIM = "#1d1f21", "#d8d8d8", "#7c7f83"
BASIC = ["#1d1f21", "#e0555a", "#6fc276", "#e5c07b", "#61afef", "#c678dd", "#56b6c2", "#d8d8d8"]
BRIGHT = ["#5c6370", "#ff6b70", "#8fe39a", "#ffd88a", "#82c4ff", "#de95f0", "#7fd3de", "#ffffff"]
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def cells(line, state):
    """Yields (column, char, fg, bold, dim) for each visible character.
    state carries the attributes across lines, as tmux's capture does."""
    fg, bold, dim = state
    col, pos = 0, 0
    for m in list(SGR.finditer(line)) + [None]:
        end = m.start() if m else len(line)
        for ch in line[pos:end]:
            yield col, ch, fg, bold, dim
            col += 1
        if not m:
            state[:] = [fg, bold, dim]
            break
        pos = m.end()
        codes = [int(c) if c else 0 for c in m.group(1).split(";")]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                fg, bold, dim = None, False, False
            elif c == 1:
                bold = True
            elif c == 2:
                dim = True
            elif c == 22:
                bold = dim = False
            elif 30 <= c <= 37:
                fg = BASIC[c - 30]
            elif 90 <= c <= 97:
                fg = BRIGHT[c - 90]
            elif c == 39:
                fg = None
            elif c == 38 and i + 2 < len(codes) and codes[i + 1] == 5:
                n = codes[i + 2]
                fg = (BASIC + BRIGHT)[n] if n < 16 else None
                i += 2
            i += 1


def main(src, dst):
    lines = open(src, encoding="utf-8").read().rstrip("\n").split("\n")
    cols = max(100, max(len(SGR.sub("", l)) for l in lines))
    w, h = int(2 * PAD + cols * CELL_W), int(2 * PAD + len(lines) * CELL_H)
    # ImageMagick's usual security policy forbids reading drawing files
    # (@file, mvg:), so every glyph goes on the command line.
    args = ["/usr/bin/convert", "-size", f"{w}x{h}", f"xc:{BG}", "-pointsize", str(SIZE)]
    state = [None, False, False]
    for row, line in enumerate(lines):
        y = PAD + row * CELL_H + SIZE
        for col, ch, fg, bold, dim in cells(line, state):
            if ch == " ":
                continue
            colour = DIM if dim and fg is None else (fg or FG)
            esc = ch.replace("\\", "\\\\").replace("'", "\\'")
            args += ["-font", BOLD if bold else FONT, "-fill", colour,
                     "-draw", f"text {PAD + col * CELL_W:.1f},{y} '{esc}'"]
    subprocess.run(args + [dst], check=True)

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
