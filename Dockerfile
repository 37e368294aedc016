# The kfn server image: every binary under cmd/ (controller, eventbridge,
# scaler, kfn) in one minimal, non-root image. The Helm chart picks the
# binary per component with `command`. Function runtime images are built
# from runtimes/<runtime>/Dockerfile.
#
#   docker build -t kfn:dev --build-arg VERSION=$(git describe --always) .

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/kfn-dev/kfn/cli.Version=${VERSION}" \
      -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kfn"]
