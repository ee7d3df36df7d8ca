"""``python -m eval browse`` (wired in by eval/__main__.py)."""
from __future__ import annotations

import argparse
import json


def cmd_browse(args: argparse.Namespace) -> int:
    from eval.browse.pages import build_browser
    result = build_browser(args.runs, args.out, bench=args.bench, page_size=args.page_size, overwrite=args.overwrite)
    print(json.dumps(result, indent=1))
    print(f"open {args.out}/index.html")
    return 0


def add_browse_parser(subparsers, parents=()) -> None:
    p = subparsers.add_parser("browse", help="a static offline HTML browser of samples, answers and failures",
                              parents=list(parents))
    p.add_argument("runs", nargs="+", help="run folders of one benchmark; the first is run A")
    p.add_argument("--bench", default=None, help="benchmark folder (default: the one run A's run.json names)")
    p.add_argument("--out", required=True, help="folder to write: index.html, samples/, media/")
    p.add_argument("--page-size", type=int, default=50, help="cards per page in index.html")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --out that is not a browser")
    p.set_defaults(func=cmd_browse)
