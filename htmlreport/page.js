// The readout: what a mark under the pointer stands for. The page reads
// without it; it only names the steps and the value of a column or point.
(function () {
  var box = document.getElementById("readout");
  function fmt(v, unit) {
    if (unit === "ms") return (v >= 10 ? v.toFixed(1) : v.toFixed(2)) + " ms";
    if (unit === "%") return v.toFixed(1) + "%";
    return (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(2)) + (unit ? " " + unit : "");
  }
  document.addEventListener("mousemove", function (ev) {
    var t = ev.target;
    if (!t || !t.dataset || t.dataset.mean === undefined) { box.style.display = "none"; return; }
    var svg = t.closest("svg");
    var unit = svg ? svg.dataset.unit : "";
    var d = t.dataset;
    var g = t.closest("[data-scale]");
    var scale = g ? parseFloat(g.dataset.scale) : 1;
    var what = d.first === "all" ? "all " + d.n + " steps" :
      (d.n === "1" ? "item " + d.first : "items " + d.first + "–" + d.last + " (" + d.n + ")");
    box.textContent = d.field + ": " + fmt(parseFloat(d.mean) * scale, unit) + " · " + what;
    box.style.display = "block";
    box.style.left = Math.min(ev.clientX + 14, window.innerWidth - 380) + "px";
    box.style.top = (ev.clientY + 14) + "px";
  });
})();
