"""Which name a base image is pulled by when a registry stands in for the ones the
engine's mirror does not serve, and which pull errors are the registry's doing (the
engine's own wording, as read from its pulls against loopback registries)."""

from __future__ import annotations

import pytest

from agentenvs.envs.terminal.images import pull_problem, registry_host, via_registry


@pytest.mark.parametrize(
    ("image", "pulled"),
    [
        ("ghcr.io/org/img:tag", "127.0.0.1:5000/ghcr.io/org/img:tag"),
        ("quay.io/org/img", "127.0.0.1:5000/quay.io/org/img"),
        ("registry.example:8443/a/b:1", "127.0.0.1:5000/registry.example:8443/a/b:1"),
        # Docker Hub names: the engine's mirror serves them as written
        ("python:3.13-slim", "python:3.13-slim"),
        ("library/debian:trixie", "library/debian:trixie"),
        ("docker.io/library/python:3.13", "docker.io/library/python:3.13"),
        ("laude-institute/t-bench/python-3-13:1", "laude-institute/t-bench/python-3-13:1"),
        # already on the registry, or on a loopback host
        ("127.0.0.1:5000/ghcr.io/org/img:tag", "127.0.0.1:5000/ghcr.io/org/img:tag"),
        ("127.0.0.1:9/library/python:3.13-slim", "127.0.0.1:9/library/python:3.13-slim"),
        ("localhost:5001/x:1", "localhost:5001/x:1"),
    ],
)
def test_names_on_other_registries_are_pulled_through_the_configured_one(
    image: str, pulled: str
) -> None:
    assert via_registry(image, "127.0.0.1:5000") == pulled
    assert via_registry(image, "http://127.0.0.1:5000/") == pulled
    assert via_registry(image, None) == image
    assert via_registry(image, "") == image


def test_the_registry_a_name_is_pulled_from() -> None:
    assert registry_host("python:3.13-slim") == "docker.io"
    assert registry_host("laude-institute/t-bench/python-3-13:1") == "docker.io"
    assert registry_host("ghcr.io/org/img:tag") == "ghcr.io"
    assert registry_host("127.0.0.1:5000/library/python:3.13") == "127.0.0.1:5000"


@pytest.mark.parametrize(
    ("error", "why"),
    [
        (
            'Head "http://127.0.0.1:5101/v2/library/python/manifests/3.13-slim": '
            "no basic auth credentials",
            "refused the credentials",
        ),
        ("unauthorized: authentication required", "refused the credentials"),
        ("toomanyrequests: You have reached your pull rate limit", "429 too many requests"),
        ("error parsing HTTP 429 response body: invalid character", "429 too many requests"),
        ('Get "http://127.0.0.1:5103/v2/": context deadline exceeded', "did not answer in time"),
        ("net/http: TLS handshake timeout", "did not answer in time"),
        (
            'Get "https://registry.invalid/v2/": dial tcp: lookup registry.invalid: no such host',
            "could not be reached",
        ),
    ],
)
def test_a_pull_the_registry_failed_is_told_apart(error: str, why: str) -> None:
    found = pull_problem(f"500 Server Error: Internal Server Error ({error})")
    assert found is not None and why in found


@pytest.mark.parametrize(
    "error",
    [
        "manifest for 127.0.0.1:5000/library/no-such-image:1 not found: manifest unknown",
        "pull access denied for nosuch/image, repository does not exist or may require "
        "'docker login': denied: requested access to the resource is denied",
        "The command '/bin/sh -c curl https://example.invalid' returned a non-zero code: 6",
    ],
)
def test_the_registrys_answer_about_the_image_is_not_its_failure(error: str) -> None:
    assert pull_problem(error) is None
