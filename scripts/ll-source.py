#!/usr/bin/env python3
"""A live Low-Latency HLS source: real H.264/AAC by ffmpeg, published on a
real-time clock as files into a directory (an edge's root) and/or as an
HTTP origin that answers blocking playlist reloads. The source itself is
tests/integration/he_llsource.py, which the integration tests use.

  scripts/ll-source.py --dir demo/library/live          # files
  scripts/ll-source.py --port 9100                      # origin
  scripts/ll-source.py --help
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import he_llsource  # noqa: E402

if __name__ == "__main__":
    sys.exit(he_llsource.main())
