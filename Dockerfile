# idemnode server image: one static binary on an empty base, run as a
# non-root user. No builder image is pulled: scripts/docker-image.sh builds
# the binary on the host (CGO_ENABLED=0) into a temporary build context:
#
#   idemnode   the static linux binary
#   data/      an empty directory, becomes /data owned by 65532
#
#   scripts/docker-image.sh [TAG]      # default tag idemnode:dev
#
# Without arguments the container runs a single node with its data in the
# /data volume, once told how to secure it: TLS flags for mounted
# certificates (docs/SECURITY.md), or IDEMNODE_INSECURE=true to serve in
# plaintext (`docker run -e IDEMNODE_INSECURE=true idemnode:dev`); without
# either it refuses to start. A cluster passes its own `serve` flags (see
# docker-compose.yml and charts/idemnode).
FROM scratch

COPY idemnode /idemnode
# /data must belong to the runtime user: a named volume mounted there starts
# as a copy of this directory, ownership included.
COPY --chown=65532:65532 data/ /data/

# 7400 gRPC API, 7401 Raft, 7402 gossip (TCP and UDP), 7403 HTTP /healthz /readyz /metrics,
# 7404 the HTTP/JSON API.
EXPOSE 7400/tcp 7401/tcp 7402/tcp 7402/udp 7403/tcp 7404/tcp
VOLUME ["/data"]
USER 65532:65532
WORKDIR /data
ENTRYPOINT ["/idemnode"]
CMD ["serve", "--data-dir=/data", "--grpc-addr=0.0.0.0:7400", "--http-addr=0.0.0.0:7403", "--api-addr=0.0.0.0:7404"]
