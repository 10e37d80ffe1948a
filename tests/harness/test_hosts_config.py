"""The hosts of an SSH campaign: campaign fields, hosts files and --hosts, with errors that
name the file, the line and the field."""
from __future__ import annotations

import pytest

from harness.config import CampaignError, load_campaign, resolve
from harness.hosts import Host, HostsError, parse_hosts, read_hosts_arg


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    return tmp_path


def test_strings_mappings_and_ssh_config_aliases(home):
    key = home / ".ssh" / "lab_key"
    key.write_text("not read here")
    (home / ".ssh" / "config").write_text(
        "Host lab-3\n  HostName 10.0.0.13\n  User admin\n  Port 2203\n"
        "  IdentityFile ~/.ssh/lab_key\n")
    hosts = parse_hosts(["10.0.0.11", "ops@10.0.0.12:2222", "lab-3",
                         {"address": "10.0.0.14", "user": "u", "key": str(key)},
                         {"alias": "lab-3", "port": 22}])
    assert hosts[0] == Host("10.0.0.11", 22, "root", None, "10.0.0.11")
    assert hosts[1] == Host("10.0.0.12", 2222, "ops", None, "ops@10.0.0.12:2222")
    assert hosts[2] == Host("10.0.0.13", 2203, "admin", str(key), "lab-3")
    assert hosts[3].user == "u" and hosts[3].key == str(key)
    assert hosts[4] == Host("10.0.0.13", 22, "admin", str(key), "lab-3")
    assert str(hosts[1]) == "ops@10.0.0.12:2222" and str(hosts[0]) == "root@10.0.0.11"


@pytest.mark.parametrize("entries, message", [
    ([], "a non-empty list of hosts"),
    (["10.0.0.1", {"address": "10.0.0.2", "prot": 22}], "hosts[1].prot: unknown field"),
    ([{"address": "10.0.0.2", "port": 70000}], "hosts[0].port: 70000 is not a port number"),
    ([{"user": "root"}], "hosts[0]: a host needs 'address'"),
    ([{"address": "10.0.0.2", "key": "/nonexistent/key"}], "hosts[0].key: no such file"),
    (["10.0.0.1", "root@10.0.0.1"], "hosts[1]: root@10.0.0.1 is listed twice (also hosts[0])"),
    (["a b"], "hosts[0]: 'a b' is not [user@]address[:port]"),
    ([{"alias": "nowhere"}], "hosts[0].alias: 'nowhere' is not a Host of ~/.ssh/config"),
    ([42], "hosts[0]: a host is a string or a mapping"),
])
def test_bad_hosts_are_named(home, entries, message):
    with pytest.raises(HostsError) as exc:
        parse_hosts(entries)
    assert message in str(exc.value)


def test_campaign_fields_with_file_and_line(home, tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("workload: queue\nhosts:\n  - 10.0.0.1\n  - {address: 10.0.0.2, port: x}\n")
    with pytest.raises(CampaignError) as exc:
        load_campaign(f)
    assert str(exc.value).startswith(f"{f}:4: hosts[1].port: 'x' is not a port number")
    f.write_text("hosts: [10.0.0.1, 10.0.0.2]\nnodes: 3\n")
    with pytest.raises(CampaignError, match=r"c.yaml:2: field 'nodes': 3 nodes but 2 hosts"):
        load_campaign(f)
    f.write_text("hosts: [10.0.0.1, 10.0.0.2, 10.0.0.3]\nbackend: docker\n")
    with pytest.raises(CampaignError, match=r"c.yaml:2: field 'backend': hosts are reached over SSH"):
        load_campaign(f)
    f.write_text("hosts: [10.0.0.1]\nhost_key_policy: trust-all\n")
    with pytest.raises(CampaignError, match=r"c.yaml:2: field 'host_key_policy': 'trust-all' is not "
                                            r"one of strict, accept-new"):
        load_campaign(f)
    f.write_text("workload: queue\nhosts: [10.0.0.1, 10.0.0.2]\n")
    with pytest.raises(CampaignError, match="replication_factor': 3 is more than the 2 nodes"):
        load_campaign(f)


def test_hosts_resolve_to_one_node_each_on_ssh(home):
    cfg = resolve({"workload": "register", "hosts": ["10.0.0.1", "10.0.0.2", "10.0.0.3",
                                                     "10.0.0.4"]}, {})
    assert (cfg.backend, cfg.nodes, cfg.controllers, cfg.host_key_policy) == ("ssh", 4, 3, "strict")
    cfg = resolve({"hosts": ["10.0.0.1", "10.0.0.2"], "replication_factor": 2,
                   "min_insync_replicas": 1}, {})
    assert (cfg.nodes, cfg.controllers) == (2, 2)


def test_hosts_argument_file_or_list(home, tmp_path):
    assert read_hosts_arg("10.0.0.1,ops@10.0.0.2:2222") == {
        "hosts": ["10.0.0.1", "ops@10.0.0.2:2222"]}
    d = tmp_path / "lab"
    d.mkdir()
    (d / "k").write_text("")
    f = d / "hosts.yaml"
    f.write_text("hosts:\n  - {address: 10.0.0.1, key: k}\nknown_hosts: known\n"
                 "host_key_policy: accept-new\n")
    values = read_hosts_arg(str(f))
    assert values["known_hosts"] == str(d / "known")  # relative to the hosts file
    assert values["hosts"][0]["key"] == str(d / "k")
    assert values["host_key_policy"] == "accept-new"
    f.write_text("- 10.0.0.1\n- 10.0.0.2\n")
    assert read_hosts_arg(str(f)) == {"hosts": ["10.0.0.1", "10.0.0.2"]}
    f.write_text("- 10.0.0.1\n- {address: 10.0.0.2, prot: 1}\n")
    with pytest.raises(HostsError, match=r"hosts.yaml:2: hosts\[1\].prot: unknown field"):
        read_hosts_arg(str(f))
    f.write_text("hosts: [10.0.0.1]\nusers: [x]\n")
    with pytest.raises(HostsError, match="unknown field 'users'"):
        read_hosts_arg(str(f))
    f.write_text("hosts: [10.0.0.1\n")
    with pytest.raises(HostsError, match=r"hosts.yaml:2: not valid YAML"):
        read_hosts_arg(str(f))
    with pytest.raises(HostsError, match="no such file"):
        read_hosts_arg(str(d / "missing.yaml"))


def test_a_matrix_on_hosts_runs_one_cell_at_a_time(home, tmp_path, capsys):
    from harness.cli import EXIT_USAGE, main
    f = tmp_path / "m.yaml"
    f.write_text('seeds: "1-2"\nhosts: [10.0.0.1, 10.0.0.2, 10.0.0.3]\nworkloads:\n'
                 '  - {name: r, workload: register}\nnemeses:\n  - {name: p, nemesis: [partition]}\n')
    assert main(["campaign", str(f), "-n", "2"]) == EXIT_USAGE
    assert "one cell at a time: leave out -n" in capsys.readouterr().err


def test_spare_hosts_are_named_apart_and_never_twice(home, tmp_path):
    """``spare_hosts``: machines a run may add as new nodes (the decommission package's new
    broker). They are not nodes (``nodes`` counts ``hosts``), need ``hosts``, and a host in
    both lists is an error naming both places, with file and line."""
    from harness.hosts import parse_all_hosts
    hosts, spares = parse_all_hosts({"hosts": ["10.0.0.1", "10.0.0.2", "10.0.0.3"],
                                     "spare_hosts": ["ops@10.0.0.4"]})
    assert [h.address for h in hosts] == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert spares == [Host("10.0.0.4", 22, "ops", None, "ops@10.0.0.4")]
    cfg = resolve({"workload": "queue"}, {"hosts": ["10.0.0.1", "10.0.0.2", "10.0.0.3"],
                                          "spare_hosts": ["10.0.0.4"]})
    assert cfg.nodes == 3 and cfg.spare_hosts == ["10.0.0.4"] and cfg.backend == "ssh"
    f = tmp_path / "hosts.yaml"
    f.write_text("hosts: [10.0.0.1, 10.0.0.2]\nspare_hosts:\n  - 10.0.0.3\n  - 10.0.0.1\n")
    with pytest.raises(HostsError) as exc:
        read_hosts_arg(str(f))
    assert str(exc.value).startswith(
        f"{f}:4: spare_hosts[1]: root@10.0.0.1 is listed twice (also hosts[0])"), exc.value
    f.write_text("hosts: [10.0.0.1]\nspare_hosts: [{address: 10.0.0.3, prot: 2}]\n")
    with pytest.raises(HostsError, match=r"spare_hosts\[0\]\.prot: unknown field"):
        read_hosts_arg(str(f))
    c = tmp_path / "c.yaml"
    c.write_text("workload: queue\nspare_hosts: [10.0.0.3]\n")
    with pytest.raises(CampaignError, match=r"c.yaml:2: field 'spare_hosts': spare hosts are "
                                            r"added to a cluster on 'hosts'"):
        load_campaign(c)
