"""The live debug console: a local page served from the runtime process (`--web HOST:PORT`, docs/console.md).

Imported only when the console is on: the web stack (aiohttp) and everything here cost nothing otherwise.
Wired from the composition root / commands through `console.start_console`; the runtime's core never imports it.
"""
