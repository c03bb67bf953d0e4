"""Text for the app's own small HTML (the translation headline, its notes): escaped, so a token never becomes markup."""
from __future__ import annotations

import html


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)
