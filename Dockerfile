# The kfn server image: every binary under cmd/ (controller, eventbridge,
# scaler, kfn) in one minimal, non-root image. The Helm chart picks the
# binary per component with `command`. Function runtime images are built
# from runtimes/nodejs/Dockerfile and runtimes/python/Dockerfile, with the
# arguments runtimes/images.txt gives each runtime.
#
#   docker build -t kfn:dev --build-arg VERSION=$(git describe --always) .
#
# GO_IMAGE and BASE_IMAGE name the build and run bases; the defaults are the
# public images. Where no registry can be reached, test/node/images.sh
# passes bases it made from Debian packages and the machine's Go.
ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/kfn-dev/kfn/cli.Version=${VERSION}" \
      -o /out/ ./cmd/...

FROM ${BASE_IMAGE}
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kfn"]
