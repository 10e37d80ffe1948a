"""The slots that bound how many Docker tests run at once across the pytest-xdist workers
(tests/conftest.py): never more holders than slots, and a freed slot is taken."""
import threading

from conftest import docker_slot


def test_no_more_holders_than_slots_and_every_one_gets_a_turn(tmp_path):
    lock, inside, most, done = threading.Lock(), [0], [0], []
    release = threading.Event()

    def hold(i):
        with docker_slot(tmp_path, slots=2, poll_s=0.01):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            release.wait(30)
            with lock:
                inside[0] -= 1
                done.append(i)

    threads = [threading.Thread(target=hold, args=(i,), daemon=True) for i in range(5)]
    for t in threads:
        t.start()
    deadline = threading.Event()
    for _ in range(3000):  # until two are in (at most 30 s)
        with lock:
            if inside[0] == 2:
                break
        deadline.wait(0.01)
    assert inside[0] == 2
    release.set()
    for t in threads:
        t.join(30)
    assert sorted(done) == list(range(5)) and most[0] == 2
