import sys
from playwright.sync_api import sync_playwright
ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]
src, out = sys.argv[1], sys.argv[2]
sel = sys.argv[3] if len(sys.argv) > 3 else None
with sync_playwright() as pw:
    b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
    p = b.new_page(viewport={"width": 1280, "height": 900})
    p.goto("file://" + src, wait_until="load")
    if sel:
        p.locator(sel).first.screenshot(path=out)
    else:
        p.screenshot(path=out, full_page=True)
    b.close()
