package dev.exactlyonce.console;

import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.HttpMethod;
import org.springframework.security.config.Customizer;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.core.userdetails.UserDetailsService;
import org.springframework.security.provisioning.InMemoryUserDetailsManager;
import org.springframework.security.web.SecurityFilterChain;
import org.springframework.security.web.header.writers.XXssProtectionHeaderWriter;

/**
 * Who may do what: every page needs a signed-in user; viewers read, operators also act, and only through {@code POST}
 * with the page's CSRF token (Spring Security's defaults). Pages may not be framed, and a content security policy lets
 * them run no script and load nothing from elsewhere: a payload that is HTML stays text.
 */
@Configuration(proxyBeanMethods = false)
class ConsoleSecurity {

    @Bean
    SecurityFilterChain console(HttpSecurity http) throws Exception {
        return http.authorizeHttpRequests(
                        requests -> requests.requestMatchers(HttpMethod.POST, "/parked/**", "/dead-letters/**")
                                .hasRole(ConsoleProperties.Role.OPERATOR.name())
                                .anyRequest()
                                .authenticated())
                .formLogin(Customizer.withDefaults())
                .logout(Customizer.withDefaults())
                .headers(headers -> headers.contentSecurityPolicy(policy -> policy.policyDirectives(
                                "default-src 'self'; script-src 'none'; style-src 'self' 'unsafe-inline';"
                                        + " frame-ancestors 'none'; form-action 'self'"))
                        .xssProtection(xss -> xss.headerValue(XXssProtectionHeaderWriter.HeaderValue.DISABLED)))
                .build();
    }

    @Bean
    UserDetailsService users(ConsoleProperties properties) {
        InMemoryUserDetailsManager users = new InMemoryUserDetailsManager();
        properties
                .users()
                .forEach(user -> users.createUser(User.withUsername(user.name())
                        .password(user.password())
                        .roles(user.role().name())
                        .build()));
        return users;
    }
}
