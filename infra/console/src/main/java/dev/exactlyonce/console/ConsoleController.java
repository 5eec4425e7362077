package dev.exactlyonce.console;

import java.io.UncheckedIOException;
import java.net.URI;
import java.security.Principal;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import org.jspecify.annotations.Nullable;
import org.springframework.security.core.Authentication;
import org.springframework.stereotype.Controller;
import org.springframework.ui.Model;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.client.RestClientException;
import org.springframework.web.servlet.mvc.support.RedirectAttributes;

/** The console's pages: the overview, an event looked up, the parked outbox rows, and the audit log. */
@Controller
class ConsoleController {

    private final ServiceEndpoints services;

    private final BrokerDeadLetters deadLetters;

    private final AuditLog audit;

    ConsoleController(ServiceEndpoints services, BrokerDeadLetters deadLetters, AuditLog audit) {
        this.services = services;
        this.deadLetters = deadLetters;
        this.audit = audit;
    }

    @GetMapping("/")
    String overview(Model model) {
        model.addAttribute("instances", this.services.instances());
        model.addAttribute("now", Instant.now());
        return "overview";
    }

    @GetMapping("/events")
    String lookup(@RequestParam(name = "id", required = false) @Nullable String id, Model model) {
        model.addAttribute("id", id);
        if (id == null || id.isBlank()) {
            return "events";
        }
        UUID eventId;
        try {
            eventId = UUID.fromString(id.strip());
        } catch (IllegalArgumentException ex) {
            model.addAttribute(
                    "error", "Not an event id: an event id is a UUID, such as 01938a52-7c1e-7d3a-9f3e-2b5c8d1e4f60");
            return "events";
        }
        model.addAttribute("eventId", eventId);
        model.addAttribute("lookups", this.services.lookup(eventId));
        return "events";
    }

    @GetMapping("/parked")
    String parked(Model model, Authentication user) {
        ServiceEndpoints.ParkedRows parked = this.services.parked();
        model.addAttribute("parked", parked.rows());
        model.addAttribute("unreachable", parked.unreachable());
        model.addAttribute(
                "operator",
                user.getAuthorities().stream()
                        .anyMatch(authority -> authority.getAuthority().equals("ROLE_OPERATOR")));
        return "parked";
    }

    /** Releases (tried again) or skips (never published) one parked row of one instance. */
    @PostMapping("/parked/{action:release|skip}")
    String act(
            @PathVariable String action,
            @RequestParam URI instance,
            @RequestParam UUID id,
            Principal user,
            RedirectAttributes flash) {
        String service = this.services.serviceAt(instance).orElse(null);
        if (service == null) {
            flash.addFlashAttribute("error", "No service of the console's settings answers at " + instance);
            return "redirect:/parked";
        }
        boolean applied;
        try {
            applied = this.services.act(instance, id, action);
        } catch (RestClientException ex) {
            audit(user, action + " failed", service, instance, id, 0, flash);
            flash.addFlashAttribute(
                    "error",
                    ("%s of %s failed at %s (%s): is the service's outbox endpoint writable"
                                    + " (idempotency.endpoint.outbox-write-enabled)?")
                            .formatted(action, id, instance, ex.getMessage()));
            return "redirect:/parked";
        }
        if (!audit(user, action, service, instance, id, applied ? 1 : 0, flash)) {
            return "redirect:/parked";
        }
        flash.addFlashAttribute(
                "message",
                applied
                        ? "%s: outbox row %s of %s"
                                .formatted(action.equals("release") ? "Released" : "Skipped", id, service)
                        : "Outbox row %s of %s was no longer parked: nothing done".formatted(id, service));
        return "redirect:/parked";
    }

    /** Appends the action to the audit log; says so on the page when it cannot. */
    private boolean audit(
            Principal user, String action, String service, URI instance, UUID id, int count, RedirectAttributes flash) {
        try {
            this.audit.append(new AuditLog.Entry(
                    Instant.now(),
                    user.getName(),
                    action,
                    "%s %s outbox row %s".formatted(service, instance, id),
                    count));
            return true;
        } catch (UncheckedIOException ex) {
            flash.addFlashAttribute(
                    "error",
                    "%s of outbox row %s was sent to %s, but the audit log could not be written: %s"
                            .formatted(action, id, service, ex.getMessage()));
            return false;
        }
    }

    @GetMapping("/dead-letters")
    String deadLetters(Model model) {
        model.addAttribute("configured", this.deadLetters.configured());
        try {
            model.addAttribute("queues", this.deadLetters.queues());
        } catch (RestClientException ex) {
            model.addAttribute("queues", List.of());
            model.addAttribute("error", "RabbitMQ's management API did not answer: " + ServiceEndpoints.reason(ex));
        }
        model.addAttribute("read", BrokerDeadLetters.READ);
        return "dead-letters";
    }

    @GetMapping("/audit")
    String audit(Model model) {
        model.addAttribute("entries", this.audit.latest());
        return "audit";
    }
}
