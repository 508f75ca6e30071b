"""Every page's kernel ends with its page, in Voila's server process (`wb dashboard` installs this).

Voila starts a kernel for each page request and runs the notebook in it while it streams the page;
its own page script asks for the kernel's shutdown on unload only once the page has finished loading.
A page reloaded or closed before that left its kernel running until the idle cull (minutes). Here:

- the page's `<head>` carries a small script that asks for its kernel's shutdown on `pagehide` from
  the first moment (the request carries the `_xsrf` cookie, which the page handler now sets);
- a page request whose browser went away while it streamed shuts its kernel down;
- a kernel whose page finished streaming but never connected to it (a page gone before its scripts
  started) is shut down `grace_s` seconds later;
- a second shutdown request for a kernel already gone is answered as done, not as an error.

With Voila's preheated kernels (`--VoilaConfiguration.preheat_kernel=True`), a kernel's page is
rendered ahead, before any request: the early script goes into that page too, and the kernel counts
as a page's from the moment a request takes it from the pool (a waiting pool kernel is no page's, and
is neither shut down nor culled as one).

Only Voila's and Jupyter Server's objects are touched; nothing here imports the workbench's core.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import time

# Kernels of pages that have not (yet) connected: kernel id -> monotonic time the page finished
# streaming (None while it streams).
_UNCONNECTED: dict[str, float | None] = {}
_CONNECTED: set[str] = set()
# The page request being served in this task: a pooled kernel taken from the pool is handed to it.
_REQUEST: contextvars.ContextVar = contextvars.ContextVar("wb_page_request", default=None)

EARLY_SHUTDOWN_SCRIPT = """<script>
(function () {
  var sent = false;
  window.addEventListener("pagehide", function () {
    if (sent) return;
    sent = true;
    var m = document.cookie.match(/(?:^|; )_xsrf=([^;]*)/);
    var body = new FormData();
    if (m) body.append("_xsrf", decodeURIComponent(m[1]));
    navigator.sendBeacon(%(url)s, body);
  });
})();
</script>
"""


def early_shutdown_script(base_url: str, kernel_id: str) -> str:
    """The `<script>` that asks the server to shut `kernel_id` down when the page goes away."""
    url = f"{base_url.rstrip('/')}/voila/api/shutdown/{kernel_id}"
    # json.dumps gives a JavaScript string literal; "</" escaped so it cannot end the script element.
    return EARLY_SHUTDOWN_SCRIPT % {"url": json.dumps(url).replace("</", "<\\/")}


def install(grace_s: float = 30.0, check_every_s: float = 5.0) -> None:
    """Patch Voila's handlers and Jupyter Server's kernel manager (call before Voila starts)."""
    import voila.app as voila_app
    import voila.handler as voila_handler
    import voila.notebook_renderer as renderer
    import voila.shutdown_kernel_handler as shutdown_handler
    import voila.tornado.handler as tornado_handler
    from jupyter_core.utils import ensure_async
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager
    from tornado.ioloop import PeriodicCallback
    from tornado.web import authenticated

    watcher: list = []

    original_prepare = voila_handler.VoilaHandler.prepare

    async def prepare(self, *args, **kwargs):
        result = original_prepare(self, *args, **kwargs)
        if inspect.isawaitable(result):
            await result
        # Reading xsrf_token sets the `_xsrf` cookie (tornado's own mechanism; checks stay on): the
        # page's shutdown request must carry it, and Voila's page handler never set it.
        self.xsrf_token  # noqa: B018
        if not watcher:
            manager = self.kernel_manager
            watcher.append(PeriodicCallback(lambda: _cull_unconnected(manager, grace_s, ensure_async),
                                            check_every_s * 1000))
            watcher[0].start()

    voila_handler.VoilaHandler.prepare = prepare

    original_generate = renderer.NotebookRenderer.generate_content_generator

    def generate_content_generator(self, kernel_id=None, kernel_future=None):
        snippets = original_generate(self, kernel_id=kernel_id, kernel_future=kernel_future)
        handler = self.request_handler
        if not kernel_id:
            return snippets
        if handler is not None:  # a pooled kernel's page, rendered ahead, has no request yet
            _page_took(handler, kernel_id)
        script = early_shutdown_script(self.base_url, kernel_id)

        async def with_early_script():
            placed = False
            async for html, resources in snippets:  # Voila's generator yields (html, resources)
                if not placed and "</head>" in html:
                    html = html.replace("</head>", script + "</head>", 1)
                    placed = True
                yield html, resources

        return with_early_script()

    renderer.NotebookRenderer.generate_content_generator = generate_content_generator

    async def get(self, path=None):
        _REQUEST.set(self)
        left = False
        async for html in self.get_generator(path=path):
            if self.request.connection.stream is None or self.request.connection.stream.closed():
                left = True  # the browser went away: stop running the page
                break
            self.write(html)
            self.flush()
        kernel_id = getattr(self, "wb_kernel_id", None)
        if kernel_id in _UNCONNECTED and kernel_id not in _CONNECTED:
            if left:  # on_connection_close may have come before the kernel was known
                _shutdown_soon(self.kernel_manager, kernel_id, ensure_async)
            else:
                _UNCONNECTED[kernel_id] = time.monotonic()

    tornado_handler.TornadoVoilaHandler.get = authenticated(get)

    def on_connection_close(self):
        kernel_id = getattr(self, "wb_kernel_id", None)
        if kernel_id and not self._finished and kernel_id not in _CONNECTED:
            _shutdown_soon(self.kernel_manager, kernel_id, ensure_async)

    tornado_handler.TornadoVoilaHandler.on_connection_close = on_connection_close

    original_factory = voila_app.voila_kernel_manager_factory

    def kernel_manager_factory(base_class, preheat_kernel, *args, **kwargs):
        manager_class = original_factory(base_class, preheat_kernel, *args, **kwargs)
        if not preheat_kernel:
            return manager_class

        class PageKernelManager(manager_class):
            """Voila's pooling kernel manager; a kernel taken from the pool becomes its request's."""

            async def get_rendered_notebook(self, *args, **kwargs):
                render_task, rendered_cache, kernel_id = await super().get_rendered_notebook(*args, **kwargs)
                handler = _REQUEST.get()
                if handler is not None:
                    _page_took(handler, kernel_id)
                return render_task, rendered_cache, kernel_id

        return PageKernelManager

    voila_app.voila_kernel_manager_factory = kernel_manager_factory

    original_post = shutdown_handler.VoilaShutdownKernelHandler.post

    async def post(self, kernel_id):
        if kernel_id not in self.kernel_manager:
            self.set_status(204)  # already shut down (by the page's other request, or the cull)
            self.finish()
            return
        await original_post(self, kernel_id)

    shutdown_handler.VoilaShutdownKernelHandler.post = post

    original_connect = MappingKernelManager.notify_connect

    def notify_connect(self, kernel_id):
        _CONNECTED.add(kernel_id)
        _UNCONNECTED.pop(kernel_id, None)
        return original_connect(self, kernel_id)

    MappingKernelManager.notify_connect = notify_connect


def _page_took(handler, kernel_id: str) -> None:
    """`kernel_id` is the page's that `handler` serves: shut down with it, or when it never connects."""
    handler.wb_kernel_id = kernel_id
    _UNCONNECTED.setdefault(kernel_id, None)


def _shutdown_soon(manager, kernel_id: str, ensure_async) -> None:
    import asyncio

    _UNCONNECTED.pop(kernel_id, None)

    async def shutdown():
        if kernel_id in manager:
            try:
                await ensure_async(manager.shutdown_kernel(kernel_id))
            except KeyError:
                pass  # shut down meanwhile

    asyncio.ensure_future(shutdown())


def _cull_unconnected(manager, grace_s: float, ensure_async) -> None:
    now = time.monotonic()
    for kernel_id, done in list(_UNCONNECTED.items()):
        if kernel_id not in manager or kernel_id in _CONNECTED:
            _UNCONNECTED.pop(kernel_id, None)
        elif done is not None and now - done > grace_s:
            manager.log.warning("Shutting down kernel %s: its page finished loading %d s ago and never "
                                "connected to it.", kernel_id, int(now - done))
            _shutdown_soon(manager, kernel_id, ensure_async)
