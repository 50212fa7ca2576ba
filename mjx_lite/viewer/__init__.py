"""Trajectory viewer: one self-contained HTML file (three.js vendored) to open in any browser.

Typical use::

    traj = rollout(m, d, 1000)               # a Data stacked over time by lax.scan
    mjx_lite.viewer.save_html(m, traj, "out.html")
"""

from mjx_lite.viewer.html import body_poses, html, save_html

__all__ = ["body_poses", "html", "save_html"]
