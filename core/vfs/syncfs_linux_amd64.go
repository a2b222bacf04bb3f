package vfs

const sysSyncfs = 306 // syncfs(2) on linux/amd64 (the syscall package does not name it)
