// Starts the API reference page (/docs: Swagger UI, /redoc: ReDoc) from the vendored bundles,
// with the document address the page names (app/web/api_docs.py). No inline script needed.
(function () {
  "use strict";
  var holder = document.getElementById("api-docs");
  if (!holder) return;
  var url = holder.getAttribute("data-openapi-url");
  if (holder.getAttribute("data-viewer") === "redoc") {
    window.Redoc.init(url, { hideDownloadButton: false }, holder);
  } else {
    window.SwaggerUIBundle({
      url: url,
      domNode: holder,
      presets: [window.SwaggerUIBundle.presets.apis],
      layout: "BaseLayout",
      deepLinking: true,
    });
  }
})();
