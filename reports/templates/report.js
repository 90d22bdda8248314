(function () {
  "use strict";
  var all = function () { return Array.prototype.slice.call(document.querySelectorAll("details")); };
  var controls = document.querySelector(".js-only");
  if (controls) {
    controls.hidden = false;
    controls.addEventListener("click", function (e) {
      var b = e.target.closest("button");
      if (b) { all().forEach(function (d) { d.open = b.getAttribute("data-open") === "1"; }); }
    });
  }
  var reopened = [];
  window.addEventListener("beforeprint", function () {
    reopened = all().filter(function (d) { return !d.open; });
    reopened.forEach(function (d) { d.open = true; });
  });
  window.addEventListener("afterprint", function () {
    reopened.forEach(function (d) { d.open = false; });
    reopened = [];
  });
})();
