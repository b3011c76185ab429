"""The docker runtime's images: each task's image had offline or online, built or pulled.

``DockerImages`` is a base of ``runtime_docker.DockerRuntime``: the plan of a task's base
(``images``), the stand-ins offline, pulls through a registry, the task's own build (with
its wheels), each compose service's image, and the image's configuration (``ENV``,
``WORKDIR``) read once.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from agentenvs.core.errors import Fault, SandboxError
from agentenvs.envs.terminal import images
from agentenvs.envs.terminal.data import (
    ComposeService,
    TerminalTask,
    analyse_dockerfile,
)
from agentenvs.envs.terminal.needs import ONLINE_NETWORK
from agentenvs.envs.terminal.task_container import (
    TASK_LABEL,
)
from agentenvs.sandbox.docker import (
    _docker_module,
)

#: how long one image build may take (Harbor's ``build_timeout_sec`` default; a task's
#: own ``[environment] build_timeout_sec`` holds for its build)
BUILD_TIMEOUT_S = 600

#: how long a pull may go without a word from the engine (its answer, then each line of
#: progress) before it is cancelled as a registry that did not answer in time; a slow
#: registry that answers, and a long download that progresses, are not cut short
PULL_TIMEOUT_S = 300.0


class BuildTimeout(Exception):
    """An image build that ran past its task's ``build_timeout_sec``."""

    def __init__(self, limit: float) -> None:
        super().__init__(
            f"the build ran past its limit of {limit:g} s ([environment] build_timeout_sec)"
        )


class PullTimeout(Exception):
    """A pull the engine said nothing of for ``pull_timeout_s`` (then cancelled)."""

    def __init__(self, limit: float) -> None:
        super().__init__(
            f"no word of the pull from the engine within {limit:g} s (pull_timeout_s), cancelled"
        )


def _is_read_timeout(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from, is a read that timed out (the
    client's and its HTTP library's names for it)."""
    for _ in range(8):
        if exc is None:
            return False
        if isinstance(exc, TimeoutError) or type(exc).__name__ in (
            "ReadTimeout",
            "ReadTimeoutError",
        ):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class DockerImages:
    """Images of tasks and their services (a base of ``DockerRuntime``)."""

    #: build a task's Dockerfile even where it names a prebuilt ``docker_image`` (Harbor's
    #: ``--force-build``); by default the prebuilt image is run, as Harbor runs it
    force_build: bool = False

    #: the pull deadline (``PULL_TIMEOUT_S``): set on the runtime to change it
    pull_timeout_s: float = PULL_TIMEOUT_S

    @property
    def offline(self) -> bool:
        """Whether images are built without pulls (decided once: see :meth:`_can_pull`)."""
        if self._offline is None:
            self._offline = not self._can_pull()
        return self._offline

    @property
    def networkless(self) -> bool:
        """Whether the containers get no network: offline, or an engine that has no
        network for them (``dockerd --bridge=none``, asked once). Builds and tests are then
        served by the offline stand-ins and the tests' network needs are unmet, while base
        images are still pulled where the engine can pull (a registry on loopback): a
        test bootstrap that cannot reach its host is never scored as the agent's failure."""
        if self._networkless is None:
            self._networkless = self.offline or not self._has_network()
        return self._networkless

    def _has_network(self) -> bool:
        try:
            found = self.client.api.networks(names=[ONLINE_NETWORK])
        except Exception:  # noqa: BLE001 - no answer: no network the runtime can give
            return False
        return any(n.get("Name") == ONLINE_NETWORK for n in found or ())

    def _can_pull(self) -> bool:
        """Whether the engine reaches its registry (asked once, about a tiny official image)."""
        try:
            self.client.api.inspect_distribution("busybox:latest")
        except Exception:
            return False
        return True

    def _present(self, image: str) -> bool:
        docker = _docker_module()
        try:
            self.client.api.inspect_image(image)
        except (docker.errors.ImageNotFound, docker.errors.APIError):
            return False
        return True

    def plan(self, task: TerminalTask) -> list[images.BasePlan]:
        """How each base image of ``task`` is had (raises UnprovidableError if it cannot be)."""
        plans = images.plan_bases(
            task,
            online=not self.offline,
            present=self._present,
            image_map=self.image_map,
            build_args={"BASE_IMAGE": self.base_image},
            registry=self.registry,
        )
        notes = [p.note for p in plans if p.note]
        self._notes[task.id] = "; ".join(dict.fromkeys(notes)) if notes else None
        return plans

    def standin_note(self, task: TerminalTask) -> str | None:
        """What the local images that stand in for ``task``'s bases differ in, as last
        planned (None: nothing known, or the bases are the task's own)."""
        if task.id not in self._notes:
            self.plan(task)
        return self._notes.get(task.id)

    def image(self, task: TerminalTask) -> str:
        """The task's image tag, built first if this machine lacks it (and the images of
        its compose sidecars, had as base images are: :meth:`service_images`).

        Raises :class:`images.UnprovidableError` when a base image cannot be had, and
        :class:`SandboxError` when the build fails (its log's tail says why; a stand-in
        that could not provide a package names it).
        """
        tag = self._task_image(task)
        if task.services and task.id not in self._services:
            self.service_images(task)
        return tag

    @staticmethod
    def service_task(task: TerminalTask, service: ComposeService) -> TerminalTask:
        """A service of ``task`` as a task of its own, whose image is planned and built as
        a task's is (a ``build:`` service) or had as a prebuilt base (``image:``)."""
        sid = f"{task.id}--{service.name}"
        if service.dockerfile is not None and service.context is not None:
            found = analyse_dockerfile(service.dockerfile)
            return dataclasses.replace(
                task,
                id=sid,
                context=service.context,
                dockerfile=service.dockerfile,
                docker_image=None,
                base_image=found["base_image"],
                platform=found["platform"],
                services=(),
            )
        return dataclasses.replace(
            task,
            id=sid,
            context=Path("/nonexistent-agentenvs-service"),
            dockerfile=Path("/nonexistent-agentenvs-service/Dockerfile"),
            docker_image=service.image,
            base_image=service.image or "",
            services=(),
        )

    def service_plan(self, task: TerminalTask, service: ComposeService) -> list[images.BasePlan]:
        """How a service's image (or its Dockerfile's bases) is had; raises
        :class:`images.UnprovidableError` naming the service when it cannot be."""
        try:
            return self.plan(self.service_task(task, service))
        except images.UnprovidableError as exc:
            said = str(exc).replace("base image", "image", 1) if service.image else str(exc)
            raise images.UnprovidableError(
                f"the second container ({service.name}): {said}"
            ) from exc

    def service_images(self, task: TerminalTask) -> list[tuple[ComposeService, str]]:
        """(service, image) of each compose sidecar of ``task``: a ``build:`` service is
        built like the task's image (offline through the stand-ins), an ``image:`` one is
        used when present, mapped offline, or pulled online (as a base image is)."""
        found = self._services.get(task.id)
        if found is not None:
            return found
        made: list[tuple[ComposeService, str]] = []
        for service in task.services:
            plans = self.service_plan(task, service)
            if service.dockerfile is not None:
                # a failed build says "cannot build the image of task '<task>--<service>'"
                made.append((service, self._task_image(self.service_task(task, service))))
                continue
            plan = plans[0]
            made.append((service, self._pull_base(plan) if plan.how == "pull" else plan.use))
        self._services[task.id] = made
        return made

    def _task_image(self, task: TerminalTask) -> str:
        with self._build_lock:
            tag = self._images.get(task.id)
            if tag is not None:
                return tag
            task = images.as_run(task, force_build=self.force_build)
            plans = self.plan(task)
            offline_build = self.networkless
            if not offline_build and not task.dockerfile.is_file():
                # a Harbor task with a prebuilt image and no Dockerfile: that image
                tag = plans[0].use
                if plans[0].how == "pull":
                    tag = self._pull_base(plans[0])
                self._images[task.id] = tag
                return tag
            for p in plans:
                if p.how == "pull":
                    self._pull_base(p)
            ids = [
                self.client.api.inspect_image(p.written if p.how == "pull" else p.use)["Id"]
                if p.how != "stage"
                else p.use
                for p in plans
            ]
            wheels = self.build_wheels(task) if offline_build else []
            digest = images.image_digest(
                [
                    images.context_digest(task.context),
                    "" if task.dockerfile.is_file() else f"prebuilt {task.docker_image}",
                    "offline" if offline_build else "online",
                    images.offline_digest() if offline_build else "",
                    *(w.name for w in wheels),
                    self.base_image,
                    *ids,
                ]
            )
            tag = f"agentenvs/tb-{images.task_image_name(task)}:{digest}"
            if not self._present(tag):
                self._build(task, tag, plans, offline_build, wheels)
            self._images[task.id] = tag
            return tag

    def build_wheels(self, task: TerminalTask) -> list[Path]:
        """The wheels an offline build of ``task`` gets: the build and test-time
        wheelhouses' when its Dockerfile runs pip (none otherwise, so that its layers
        stay those of a build without them)."""
        from agentenvs.envs.terminal.needs import pip_installs, stage_runs

        runs = stage_runs(task, {"BASE_IMAGE": self.base_image})
        if not any(pip_installs(run) for _, stage in runs for run in stage):
            return []
        found: dict[str, Path] = {}
        for folder in (self.wheelhouse, self.build_wheelhouse):
            if folder is not None and folder.is_dir():
                found.update((p.name, p) for p in folder.glob("*.whl"))
        return [found[k] for k in sorted(found)]

    def _pull_base(self, plan: images.BasePlan) -> str:
        """Pull a base image, so that the build finds it under the name its Dockerfile
        writes (the build pulls nothing itself); returns that name.

        Through the configured registry first; where it has no such image, from the name's
        own registry, as the engine's mirror does for Docker Hub.
        """
        if plan.use != plan.written:
            try:
                self._pull(plan.use, plan.written)
                return plan.written
            except SandboxError:
                pass  # the registry's answer that it has no such image
        self._pull(plan.written)
        return plan.written

    def _pull(self, image: str, written: str | None = None) -> None:
        """Pull ``image`` (tagged ``written`` too when the Dockerfile names it so).

        Raises a ``registry`` :class:`Fault` when the registry failed, else
        :class:`SandboxError` (the registry has no such image: the task's)."""
        try:
            for chunk in self._pull_stream(image):
                if isinstance(chunk, dict) and chunk.get("error"):
                    raise SandboxError(str(chunk["error"]))
            if written is not None and written != image and "@" not in written:
                repo, _, tag = written.rpartition(":")
                if not repo or "/" in tag:  # no tag (a colon of a host's port, or none)
                    repo, tag = written, "latest"
                self.client.api.tag(image, repo, tag)
        except Exception as exc:
            fault = self._build_fault(exc, str(exc), online=True, image=image)
            if fault is not None:
                raise fault from exc
            where = self._registry_name(image)
            raise SandboxError(
                f"cannot build the image: cannot pull {image!r} from {where}: {exc}"
            ) from exc

    def _pull_stream(self, image: str) -> Iterator[Any]:
        """The engine's pull of ``image``, line by line, cancelled (the connection closed,
        which ends the engine's pull) after ``pull_timeout_s`` without a word from it.

        The client's own ``pull`` waits without a limit for the engine, which waits out its
        own timeouts (tens of seconds, twice) on a registry that accepts and never answers.
        """
        docker = _docker_module()
        api = self.client.api
        limit = self.pull_timeout_s
        if not all(
            hasattr(api, name) for name in ("_post", "_url", "_raise_for_status", "_stream_helper")
        ):
            # a client whose internals differ from docker 7's: its own pull, without our
            # deadline (the engine's timeouts still end a silent registry's pull)
            yield from api.pull(image, stream=True, decode=True)
            return
        repository, tag = docker.utils.parse_repository_tag(image)
        headers = {}
        auth_header = docker.auth.get_config_header(
            api, docker.auth.resolve_repository_name(repository)[0]
        )
        if auth_header:
            headers["X-Registry-Auth"] = auth_header
        params = {"fromImage": repository, "tag": tag or "latest"}
        response = None
        try:
            # the timeout bounds the wait for the engine's answer and each read after it
            response = api._post(
                api._url("/images/create"),
                params=params,
                headers=headers,
                stream=True,
                timeout=limit,
            )
            api._raise_for_status(response)
            yield from api._stream_helper(response, decode=True)
        except Exception as exc:
            if _is_read_timeout(exc):
                raise PullTimeout(limit) from exc
            raise
        finally:
            if response is not None:
                response.close()

    def _registry_name(self, image: str) -> str:
        """The registry a pull of ``image`` asks, in words (Docker Hub's with its mirrors)."""
        host = images.registry_host(image)
        if host != "docker.io":
            return host
        if self._mirrors is None:
            try:
                config = self.client.info().get("RegistryConfig") or {}
                self._mirrors = [str(m) for m in config.get("Mirrors") or []]
            except Exception:  # noqa: BLE001 - only the message's wording depends on it
                self._mirrors = []
        return f"docker.io (mirror {', '.join(self._mirrors)})" if self._mirrors else host

    def _build_fault(
        self, exc: BaseException, error: str, *, online: bool, image: str | None = None
    ) -> Fault | None:
        """The Fault a failed build or pull is (None: the task's): an engine that does not
        answer, or online, a registry that failed (``images.pull_problem``)."""
        why = self.watch.ping()
        if why is not None:
            return Fault(
                f"the Docker engine does not answer while building an image ({error[:200]})",
                kind="engine",
                evidence=f"ping: {why}",
            )
        why = images.pull_problem(error) if online else None
        if why is None:
            return None
        said = " ".join(error.split())[:200]
        what = f"{image!r} from {self._registry_name(image)}" if image else "a base image"
        return Fault(
            f"cannot pull {what}: {why} ({said})",
            kind="registry",
            evidence=f"the engine's pull error: {error[:300]}",
        )

    def image_config(self, task: TerminalTask) -> dict[str, Any]:
        """The task image's ``Env`` (as a dict) and ``WorkingDir``."""
        tag = self.image(task)
        info = self._image_info.get(tag)
        if info is None:
            config = self.client.api.inspect_image(tag).get("Config") or {}
            env = dict(item.split("=", 1) for item in (config.get("Env") or []) if "=" in item)
            info = {"env": env, "workdir": config.get("WorkingDir") or "/"}
            self._image_info[tag] = info
        return info

    def _build(
        self,
        task: TerminalTask,
        tag: str,
        plans: list[images.BasePlan],
        offline_build: bool,
        wheels: Sequence[Path] = (),
    ) -> None:
        log: list[str] = []
        args = {"BASE_IMAGE": self.base_image}
        text = images.offline_dockerfile(task, plans, args) if offline_build else None
        context, dockerfile = images.build_context(task, text, wheels)
        limit = task.build_timeout_sec
        deadline = time.monotonic() + limit
        try:
            # the API's classic builder; offline: no network in RUN steps, nothing pulled
            stream = self.client.api.build(
                fileobj=context,
                custom_context=True,
                dockerfile=dockerfile,
                tag=tag,
                buildargs=args,
                network_mode="none" if offline_build else None,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
                labels={TASK_LABEL: task.id},
                platform=None if offline_build else task.platform,
                # a silent build is stopped by the read timeout, a talking one below
                timeout=limit,
            )
            for chunk in stream:
                if "stream" in chunk:
                    log.append(chunk["stream"])
                if "error" in chunk:
                    raise SandboxError(chunk["error"])
                if time.monotonic() > deadline:
                    raise BuildTimeout(limit)
        except BuildTimeout as exc:
            raise SandboxError(
                f"cannot build the image of task {task.id!r}: {exc}\n{''.join(log)[-2000:]}"
            ) from exc
        except Exception as exc:
            if time.monotonic() > deadline:  # the read timeout of a silent build
                raise SandboxError(
                    f"cannot build the image of task {task.id!r}: {BuildTimeout(limit)}"
                    f"\n{''.join(log)[-2000:]}"
                ) from exc
            fault = self._build_fault(exc, str(exc), online=not offline_build)
            if fault is not None:
                raise fault from exc
            text = "".join(log)
            marker = "agentenvs offline: cannot provide "
            unmet = sorted(
                {
                    line.split(marker, 1)[1].removesuffix(" without network").strip()
                    for line in text.splitlines()
                    if marker in line
                }
            )
            why = f"offline, could not provide {'; '.join(unmet)}" if unmet else str(exc)
            raise SandboxError(
                f"cannot build the image of task {task.id!r}: {why}\n{text[-2000:]}"
            ) from exc
