#!/usr/bin/env python3
"""Renders a `tmux capture-pane -e -p` capture (text with SGR colour codes) to a
PNG with DejaVu Sans Mono, for slides and the README. Needs Pillow.

    python3 docs/img/ansi2png.py capture.ans out.png
"""
import re
import sys

from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
BASE = [(0x1e, 0x1e, 0x1e), (0xcd, 0x31, 0x31), (0x0d, 0xbc, 0x79), (0xe5, 0xe5, 0x10),
        (0x24, 0x72, 0xc8), (0xbc, 0x3f, 0xbc), (0x11, 0xa8, 0xcd), (0xe5, 0xe5, 0xe5),
        (0x76, 0x76, 0x76), (0xf1, 0x4c, 0x4c), (0x23, 0xd1, 0x8b), (0xf5, 0xf5, 0x43),
        (0x3b, 0x8e, 0xea), (0xd6, 0x70, 0xd6), (0x29, 0xb8, 0xdb), (0xff, 0xff, 0xff)]
FG, BG = (0xd4, 0xd4, 0xd4), (0x12, 0x12, 0x12)


def color256(n):
    if n < 16:
        return BASE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    v = 8 + (n - 232) * 10
    return (v, v, v)


def parse(line):
    """Yields (char, fg, bg, bold) for one captured line."""
    fg, bg, bold, rev = None, None, False, False
    for m in re.finditer(r"\x1b\[([0-9;]*)m|(.)", line):
        if m.group(2) is not None:
            f, b = (fg or FG), (bg or BG)
            if rev:
                f, b = b, f
            yield m.group(2), f, b, bold
            continue
        codes = [int(c) if c else 0 for c in m.group(1).split(";")]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                fg, bg, bold, rev = None, None, False, False
            elif c == 1:
                bold = True
            elif c == 22:
                bold = False
            elif c == 7:
                rev = True
            elif c == 27:
                rev = False
            elif 30 <= c <= 37:
                fg = BASE[c - 30]
            elif 90 <= c <= 97:
                fg = BASE[c - 90 + 8]
            elif c == 39:
                fg = None
            elif 40 <= c <= 47:
                bg = BASE[c - 40]
            elif 100 <= c <= 107:
                bg = BASE[c - 100 + 8]
            elif c == 49:
                bg = None
            elif c in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
                col = color256(codes[i + 2])
                if c == 38:
                    fg = col
                else:
                    bg = col
                i += 2
            i += 1


# Dot (column, row) of each Braille bit; DejaVu Sans Mono has no Braille glyphs.
DOTS = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (0, 3), (1, 3)]


def braille(d, px, py, cw, ch, bits, fill):
    for bit, (cx, cy) in enumerate(DOTS):
        if bits & (1 << bit):
            x = px + 2 + cx * (cw - 4) // 2 + (cw - 4) // 4
            y = py + 2 + cy * (ch - 4) // 4 + (ch - 4) // 8
            d.rectangle([x - 1, y - 1, x + 1, y + 1], fill=fill)


def main(src, dst):
    lines = open(src, encoding="utf-8").read().rstrip("\n").split("\n")
    font = ImageFont.truetype(FONT, 16)
    bold = ImageFont.truetype(FONT.replace(".ttf", "-Bold.ttf"), 16)
    cw = int(font.getlength("M"))
    ch = 20
    cols = max(sum(1 for _ in parse(l)) for l in lines)
    img = Image.new("RGB", (cols * cw + 16, len(lines) * ch + 16), BG)
    d = ImageDraw.Draw(img)
    for y, line in enumerate(lines):
        for x, (c, f, b, bd) in enumerate(parse(line)):
            px, py = 8 + x * cw, 8 + y * ch
            if b != BG:
                d.rectangle([px, py, px + cw, py + ch], fill=b)
            if 0x2800 <= ord(c) <= 0x28FF:
                braille(d, px, py, cw, ch, ord(c) - 0x2800, f)
            elif c != " ":
                d.text((px, py), c, fill=f, font=bold if bd else font)
    img.save(dst)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
