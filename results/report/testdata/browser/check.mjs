// Loads isrbench report.html pages in headless Chromium and checks them:
//   - no console errors, no uncaught exceptions, no request other than the page itself
//     (a report must open without network access);
//   - every chart of the page's data block rendered: a non-empty SVG, with one drawn group per
//     series that has data, named as in the data block;
//   - a chart's data table builds when opened;
//   - the page prints (a PDF with print CSS).
// Screenshots (the first screen at 1366x768 and the full page) and the PDF go to --out DIR.
// Usage: node check.mjs --out DIR [--chromium PATH] NAME=FILE.html ...
// Prints one JSON object ({"ok": bool, "pages": [...]}) and exits 1 when a check failed.
import { chromium } from "playwright-core";
import { pathToFileURL } from "node:url";
import path from "node:path";
import fs from "node:fs";

const args = process.argv.slice(2);
let out = ".";
let exe = process.env.CHROMIUM || "/usr/bin/chromium";
const pages = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--out") out = args[++i];
  else if (args[i] === "--chromium") exe = args[++i];
  else {
    const eq = args[i].indexOf("=");
    if (eq < 1) { console.error(`check.mjs: want NAME=FILE, got ${args[i]}`); process.exit(2); }
    pages.push({ name: args[i].slice(0, eq), file: path.resolve(args[i].slice(eq + 1)) });
  }
}
if (!pages.length) { console.error("usage: node check.mjs --out DIR NAME=FILE.html ..."); process.exit(2); }
fs.mkdirSync(out, { recursive: true });
const userData = fs.mkdtempSync(path.join(out, "chromium-profile-"));

// A fresh profile directory (playwright passes it as --user-data-dir).
const browser = await chromium.launchPersistentContext(userData, {
  executablePath: exe,
  headless: true,
  viewport: { width: 1366, height: 768 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const report = { ok: true, pages: [] };
try {
  for (const p of pages) {
    const res = { name: p.name, file: p.file, errors: [], charts: [], shots: [] };
    report.pages.push(res);
    const page = await browser.newPage();
    const pageURL = pathToFileURL(p.file).href;
    page.on("console", (m) => { if (m.type() === "error") res.errors.push(`console: ${m.text()}`); });
    page.on("pageerror", (e) => res.errors.push(`exception: ${e.message}`));
    await page.route("**/*", (route) => {
      const u = route.request().url();
      if (u === pageURL) return route.continue();
      res.errors.push(`request outside the page: ${u}`);
      return route.abort();
    });
    await page.goto(pageURL, { waitUntil: "load" });
    await page.waitForSelector("body[data-charts-rendered]", { timeout: 15000 });
    const got = await page.evaluate(() => {
      const data = JSON.parse(document.getElementById("isrbench-data").textContent);
      const out = { kind: data.kind, failed: document.body.dataset.chartsFailed, charts: [] };
      for (const c of data.charts) {
        const r = { id: c.id, kind: c.kind, problems: [], series: [] };
        out.charts.push(r);
        const fig = document.getElementById("chart-" + c.id);
        if (!fig) { r.problems.push("no figure"); continue; }
        const svg = fig.querySelector("svg.chart-svg");
        if (!svg) { r.problems.push("no svg"); continue; }
        const box = svg.getBoundingClientRect();
        if (box.width < 100 || box.height < 60) r.problems.push(`svg is ${box.width}x${box.height}`);
        for (const s of c.series) {
          if (!s.x.length) continue;
          const g = [...svg.querySelectorAll("g.series")].find((e) => e.dataset.series === s.name);
          if (!g) { r.problems.push(`series ${s.name}: not drawn`); continue; }
          const path = g.querySelector("path.line");
          const shapes = g.querySelectorAll(".marker, rect.seg, line.spread").length;
          const d = path ? path.getAttribute("d") || "" : "";
          if (c.kind === "line" && (d.length < 4 || /NaN|Infinity/.test(d))) r.problems.push(`series ${s.name}: bad path ${d.slice(0, 40)}`);
          if (c.kind !== "line" && shapes === 0) r.problems.push(`series ${s.name}: no shapes`);
          r.series.push(s.name);
        }
        if (svg.innerHTML.includes("NaN")) r.problems.push("NaN in the svg");
        if ((c.bands || []).length && svg.querySelectorAll("rect.band").length !== c.bands.length) r.problems.push("fault windows not all shaded");
      }
      return out;
    });
    res.kind = got.kind;
    res.charts = got.charts;
    if (got.failed !== "0") res.errors.push(`${got.failed} charts failed`);
    for (const c of got.charts) for (const pr of c.problems) res.errors.push(`chart ${c.id}: ${pr}`);
    if (!got.charts.length) res.errors.push("the page has no charts");
    // the first chart's data table
    const rows = await page.evaluate(() => {
      const d = document.querySelector("figure.chart details.data");
      if (!d) return -1;
      d.open = true;
      return new Promise((ok) => setTimeout(() => ok(d.querySelectorAll("tbody tr").length), 50));
    });
    if (rows === 0) res.errors.push("the first chart's data table is empty");
    // hover read-out over the first line chart
    const hov = await page.$("figure.chart rect.hover");
    if (hov) {
      await hov.evaluate((e) => e.scrollIntoView({ block: "center" }));
      const b = await hov.boundingBox();
      await page.mouse.move(b.x + b.width * 0.6, b.y + b.height / 2);
      const tip = await page.evaluate(() => { const t = document.querySelector(".tip"); return t && t.style.display === "block" ? t.textContent : ""; });
      if (!tip) res.errors.push("no hover read-out over the first chart");
      await page.mouse.move(0, 0);
      await page.evaluate(() => { document.querySelector("figure.chart details.data").open = false; });
    }
    const top = path.join(out, `${p.name}-screen.png`);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: top });
    const full = path.join(out, `${p.name}-full.png`);
    await page.screenshot({ path: full, fullPage: true });
    await page.emulateMedia({ media: "print" });
    const pdf = path.join(out, `${p.name}.pdf`);
    await page.pdf({ path: pdf, format: "A4", printBackground: true });
    if (fs.statSync(pdf).size < 10000) res.errors.push("the printed PDF is nearly empty");
    res.shots.push(top, full, pdf);
    await page.close();
    if (res.errors.length) report.ok = false;
  }
} finally {
  await browser.close();
  fs.rmSync(userData, { recursive: true, force: true });
}
console.log(JSON.stringify(report, null, 1));
process.exit(report.ok ? 0 : 1);
