# The mcpv2 image: the static binary on an empty base, nothing else (no
# shell, no package manager). Build it with deploy/image.sh, which compiles
# the binary (CGO_ENABLED=0), gathers it with the TLS roots into a build
# context and runs `buildah bud` or `docker build` on this file:
#
#   deploy/image.sh mcpv2:latest
#
# Run a node (the data dir is the volume /data; the edge on 8000):
#
#   docker run -p 4001:4001 -p 4001:4001/udp -p 8000:8000 -v mcpv2:/data \
#     mcpv2:latest node --port 8000 --bind-host 0.0.0.0
FROM scratch
COPY mcpv2 /mcpv2
# TLS roots, for OpenID issuers and LLM APIs over HTTPS.
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# The data dir, owned by the unprivileged user the node runs as.
COPY --chown=65532:65532 data /data
ENV MCPV2_HOME=/data
USER 65532:65532
VOLUME /data
EXPOSE 4001/tcp 4001/udp 8000/tcp
ENTRYPOINT ["/mcpv2"]
CMD ["node"]
