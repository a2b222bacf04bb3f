package vfs

const sysSyncfs = 267 // syncfs(2) on linux/arm64
