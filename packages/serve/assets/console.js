// The overview's chart: the ledger's history from /api/history, drawn with uPlot, which the
// console serves itself. Loaded as a file, so the page's Content-Security-Policy allows no inline script.
for (const box of document.querySelectorAll("[data-history]")) {
  fetch(box.dataset.history)
    .then((res) => res.json())
    .then((h) => {
      const opts = {
        width: Math.min(1000, box.clientWidth || 800),
        height: 240,
        series: [
          {},
          { label: "processed", stroke: "#2a7", width: 2 },
          { label: "duplicates", stroke: "#d80", width: 2 },
          { label: "failures", stroke: "#c22", width: 2 },
        ],
        axes: [{}, { label: "per bucket" }],
      }
      box.textContent = ""
      new window.uPlot(opts, [h.at, h.processed, h.duplicates, h.failures], box)
    })
    .catch((error) => {
      box.textContent = `The history could not be read: ${error}`
    })
}
