// The console's only script besides htmx: every htmx request carries the CSRF token (the
// `csrftoken` cookie starlette-csrf sets, sent back in the `x-csrftoken` header), and a refused
// request (403, 404, 5xx) is shown in the notice bar instead of failing silently.
document.addEventListener("htmx:configRequest", function (event) {
  var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  if (match) {
    event.detail.headers["x-csrftoken"] = decodeURIComponent(match[1]);
  }
});
document.addEventListener("htmx:responseError", function (event) {
  var xhr = event.detail.xhr;
  var notice = document.getElementById("notice");
  if (!notice) return;
  var type = xhr.getResponseHeader("content-type") || "";
  var text = type.indexOf("text/plain") === 0 ? xhr.responseText : "the request failed";
  notice.textContent = "Refused (" + xhr.status + "): " + text;
  notice.className = "flash flash-error";
});
