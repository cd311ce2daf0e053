package verbs

// shmDir is where rings between processes live.
const shmDir = "/dev/shm"
