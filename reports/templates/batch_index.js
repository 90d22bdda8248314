(function () {
  var table = document.getElementById("runs"), body = table.tBodies[0];
  var heads = table.tHead.rows[0].cells;
  function value(row, i, num) {
    var cell = row.cells[i], v = cell.hasAttribute("data-v") ? cell.getAttribute("data-v") : cell.textContent.trim();
    if (!num) return v.toLowerCase();
    v = parseFloat(v);
    return isNaN(v) ? -Infinity : v;
  }
  Array.prototype.forEach.call(heads, function (th, i) {
    th.addEventListener("click", function () {
      var num = th.getAttribute("data-type") === "num";
      var asc = th.getAttribute("aria-sort") !== "ascending";
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = value(a, i, num), y = value(b, i, num);
        return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
  document.getElementById("filter").addEventListener("input", function (e) {
    var q = e.target.value.toLowerCase();
    Array.prototype.forEach.call(body.rows, function (r) {
      r.classList.toggle("hidden", q && r.textContent.toLowerCase().indexOf(q) < 0);
    });
  });
})();
