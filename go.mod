module github.com/kfn-dev/kfn

go 1.26.0
